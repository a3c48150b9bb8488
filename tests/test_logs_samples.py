"""Every real log sample (and the error texts of the system samples) scanned, with what must be found.

The expected findings were checked by reading each sample; the comparison is exact (minus WARNING-record
noise), so a rule that starts firing where it should not fails here too. Subjects are compared on their
first 50 characters.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

import pytest

from npudoctor.logs.scanner import Scanner
from tests.samples import CONSTRUCTED, SAMPLES, sample_bytes, sample_data

Expected = Tuple[str, List[Tuple[str, str]]]

EXPECTED: Dict[str, Expected] = {
    "atc_E10007_missing_framework.txt": ("atc", [('atc_failed', 'atc'), ('error_code', 'E10007')]),
    "atc_E19010_no_parser_registered.txt":
        ("atc", [
            ('atc_failed', 'atc'),
            ('error_code', 'E19010'),
            ('op_unsupported', 'ai.onnx::11::Convx'),
        ]),
    "atc_EC0010_python_module_variants.txt":
        ("atc", [
            ('atc_failed', 'atc'),
            ('error_code', 'EC0010'),
            ('missing_module', 'tbe'),
            ('missing_module', 'tbe.common'),
        ]),
    "atc_EC0010_tbe_init_traceback.txt":
        ("atc", [
            ('atc_failed', 'atc'),
            ('error_code', 'EC0010'),
            ('missing_module', 'decorator'),
        ]),
    "atc_EZ0501_ir_not_registered.txt":
        ("atc", [
            ('atc_failed', 'atc'),
            ('error_code', 'EZ0501'),
            ('op_unsupported', 'Conv'),
        ]),
    "atc_EZ3002_optype_unsupported.txt":
        ("atc", [
            ('op_rejected', 'Convx'),
            ('atc_failed', 'atc'),
            ('error_code', 'EZ3002'),
        ]),
    "atc_amct_507011_EZ9999_traceback.txt":
        ("atc", [
            ('aicore_exception', '17786444594805609729-1_0_1_vgg_16/conv1/conv1_2/Co'),
            ('atc_failed', 'atc'),
            ('error_code', '507011'),
            ('error_code', 'EZ9999'),
            ('error_record', 'AMCT'),
        ]),
    "atc_amct_quant_calibration_failure.txt": ("plog", [('error_record', 'AMCT')]),
    "atc_log_debug_fe_ge_W21000_lines.log": ("plog", [('error_code', 'W21000')]),
    "device_2020_tsch_exception_print.log": ("text", [('error_record', 'TSCH')]),
    "device_2021_aicpu_scheduler_ccecpu.log": ("plog", [('missing_library', 'libdp_extend.so')]),
    "device_aicpu_scheduler_hccl_sdma_exception.log":
        ("plog", [
            ('error_record', 'HCCL'),
            ('hccl_task_exception', 'SDMA/communication task'),
        ]),
    "device_aicpu_scheduler_run_2024.log": ("plog", []),
    "device_app_aicpu_scheduler_tdt_2025.log": ("plog", []),
    "device_atrace_ts_stars_exception_dump_2024.txt":
        ("plog", [
            ('device_exception', 'STARS task exception'),
            ('error_record', 'TSCH'),
        ]),
    "device_debug_ccecpu_warning.log": ("plog", []),
    "device_event_drv_fault_manager_2025.log":
        ("plog", [
            ('device_fault', 'AIV'),
            ('device_fault', 'HWTS/Stars-TS'),
        ]),
    "device_firmware_tsch_lpm_head_2025.log": ("plog", []),
    "device_firmware_tsch_stars_exception_2025.log":
        ("plog", [
            ('device_exception', 'STARS task exception'),
            ('error_record', 'TSCH'),
        ]),
    "device_host_run_device0_2025.log": ("plog", []),
    "device_os_kernel_sklogd_event.log":
        ("plog", [
            ('device_exception', 'task scheduler exception'),
            ('hardware_error', 'APEI hardware error'),
        ]),
    "device_slogd_slogdlog_2025.log": ("slogd", [('error_record', 'SLOGD')]),
    "device_tsch_unbind_model_stream_2020.log": ("plog", [('error_record', 'TSCH')]),
    "grep_run_plog_hccl_entry_lines.txt": ("plog", []),
    "layout_msprof_PROF_dir_tree.txt": ("text", []),
    "layout_torch_npu_ascend_pt_tree.txt": ("text", []),
    "misc_npu_smi_info_310p3.txt": ("text", []),
    "plog_2020_event_profiling_tdt_acl.log":
        ("plog", [
            ('aicore_exception', 'AI Core error'),
            ('error_code', '507011'),
            ('error_record', 'GE'),
            ('error_record', 'RUNTIME'),
            ('error_code', '0x91'),  # retCode=0x91: TS_MODEL_STREAM_EXE_FAILED
        ]),
    "plog_2021_acl_runtime_head.log": ("plog", []),
    "plog_2021_model_execute_aicore_error.log":
        ("plog", [
            ('aicore_exception', '-1_0_1_trans_TransData_170'),
            ('aicore_exception', 'AI Core error'),
            ('error_code', '507011'),
            ('error_record', 'GE'),
            ('error_record', 'RUNTIME'),
            ('error_code', '0x91'),
        ]),
    "plog_debug_aicore_error_2025.log":
        ("plog", [
            ('aicore_exception', 'GatherV3_9e31943a1a48bf81ddff1fc6379e0be3_high_per'),
            ('aicore_exception', 'vector core exception'),
            ('error_code', '507035'),
            ('error_code', 'EE8888'),
            ('error_code', 'EZ9999'),
            ('error_record', 'APP'),
            ('error_record', 'IDEDD'),
            ('error_record', 'RUNTIME'),
            ('error_code', '0x31'),  # retCode=0x31: TS_ERROR_VECTOR_CORE_EXCEPTION
        ]),
    "plog_debug_cann64_910A_aicore_exception.log":
        ("plog", [
            ('aicore_exception', '2_0_11_GatherV2'),
            ('aicore_exception', 'AI Core error'),
            ('error_code', '1343225857'),
            ('error_code', '507015'),
            ('error_code', 'EE8888'),
            ('error_code', 'EZ9999'),
            ('error_record', 'FMK'),
            ('error_record', 'RUNTIME'),
            ('error_code', '0x26'),  # retCode=0x26: TS_ERROR_AICORE_EXCEPTION
            ('error_record', 'GE'),  # its line held only -1 (4294967295), no code
            ('aicore_exception', 'GatherV2'),  # [AIC_INFO] node_name:GatherV2 (DEBUG)
        ]),
    "plog_debug_cann64_910A_engine_init.log": ("plog", [('missing_library', 'liboptiling.so')]),
    "plog_debug_cann64_910A_head.log": ("plog", []),
    "plog_debug_cann64_hccl_op_engine_assignment.log": ("plog", []),
    "plog_debug_tbe_compile_subprocess.log": ("plog", []),
    "plog_drv_mem_stats_and_sdma_edited.log":
        ("plog", [
            ('device_oom', 'device memory'),
            ('error_code', 'DRV 6'),  # `halMemAlloc failed ... drvRetCode=6` (DRV_ERROR_OUT_OF_MEMORY)
            ('error_code', 'E30008'),
            # records glued by a concurrent writer (`length=4096.[ERROR] RUNTIME(...`) are read one by one:
            # the second, an SDMA error no rule names, is an ERROR record of its own
            ('error_record', 'RUNTIME'),
        ]),
    "plog_hccl_link_error_table_debug.log": ("plog", [('error_record', 'HCCL'), ('hccl_link', 'link setup')]),
    "plog_hccl_run_info_setupagent.log": ("plog", []),
    "plog_hccl_topo_exchange_timeout_collection.log":
        ("plog", [
            ('error_code', '0x05000004'),
            ('error_code', '0x05000013'),
            ('error_record', 'HCCL'),
            ('hccl_link', 'error CQE'),  # "cqe error status[12] remoteIP"
            ('hccl_timeout', 'socket setup'),
        ]),
    "plog_mixed_trace_hccl_runtime_collage.log":
        ("plog", [
            ('error_code', '0x0500000b'),
            ('error_code', '507051'),
            ('error_record', 'RUNTIME'),
            ('hccl_link', 'error CQE'),  # the heartbeat's "cqe err status[12]" (its only HCCL ERROR record)
            ('hccl_timeout', 'socket setup'),
        ]),
    "hccl_EI0013_error-cqe_roce_plog_hccl-doc.txt":
        ("plog", [('error_code', 'EI0013'), ('error_record', 'ROCE'), ('hccl_link', 'error CQE')]),
    "plog_run_debug_level_runtime_2024.log":
        ("plog", [
            ('error_code', '507011'),
            ('error_code', 'EE8888'),
            ('error_code', 'EE9999'),
            ('error_record', 'RUNTIME'),
            ('error_code', '0x91'),
        ]),
    # GE's exception dump at EVENT level (issue 17 point 4: "nothing found" before)
    "plog_run_event_cann64_910A.log": ("plog", [('aicore_exception', 'GatherV2')]),
    "plog_run_info_ge_tdt_2024.log": ("plog", []),
    "plog_run_runtime_idedd_errors_2024.log":
        ("plog", [
            ('aicore_exception', '0/1_-1_0_GatherV21_tvmbin'),
            ('aicore_exception', 'vector core exception'),
            ('error_code', '1343225857'),
            ('error_code', '507035'),
            ('error_code', 'EE8888'),
            ('error_code', 'EZ9999'),
            ('error_record', 'APP'),
            ('error_record', 'IDEDD'),
            ('error_record', 'RUNTIME'),
            ('error_code', '0x31'),
            ('error_record', 'GE'),
        ]),
    "plog_runtime_EE1023_expand_capacity.log":
        ("plog", [
            ('error_code', '207008'),
            ('error_code', 'EE1023'),
            ('error_record', 'RUNTIME'),
        ]),
    "plog_runtime_ffts_vector_core_exception_3lines.log":
        ("plog", [
            ('aicore_exception', 'Add_ee98c6628030785f610b924ab1557b31_high_performa'),
            ('aicore_exception', 'vector core exception'),
            ('error_record', 'RUNTIME'),
            ('error_code', '0x31'),
        ]),
    "plog_stars_aivec_error_errcode_triplet_2025.log":
        ("plog", [
            ('aicore_exception', 'AddCustom_ab1b6750d7f510985325b603cb06dc8b_0'),
            ('aicore_exception', 'vector core exception'),
            ('error_code', '507035'),
            ('error_code', 'EE8888'),
            ('error_code', 'EZ9999'),
            ('error_record', 'IDEDD'),
            ('error_record', 'RUNTIME'),
            ('error_code', '0x31'),
        ]),
    "plog_tefusion_atc_error_line_2021.log": ("plog", [('error_record', 'TEFUSION')]),
    "slog_2020_host0_hdc_ge_aicpu_fe_init.log": ("plog", [('missing_library', 'liboptiling.so')]),
    "stdout_EE1023_resource_error_expand_capacity.txt": ("cann-error", [('error_code', 'EE1023')]),
    "stdout_EZ3002_transdata_aicore_310P3.txt": ("text", [('op_rejected', 'TransData')]),
    "stdout_EZ3002_with_pid_timestamp_prefix.txt":
        ("cann-error", [
            ('op_rejected', 'TransData'),
            ('error_code', 'EZ3002'),
        ]),
    "stdout_hccl_EI0011_device_memory.txt":
        ("cann-error", [
            ('device_oom', 'device memory'),
            ('error_code', 'EI0011'),
        ]),
    "stdout_hccl_EI0012_sdma_exception.txt":
        ("cann-error", [
            ('error_code', 'EI0012'),
            ('hccl_task_exception', 'SDMA/communication task'),
        ]),
    "stdout_llamacpp_cann_EZ9999_aivec_310p.txt":
        ("cann-error", [
            ('aicore_exception', 'vector core exception'),
            ('error_code', 'EZ9999'),
        ]),
    "stdout_msprof_collect_export_query.txt": ("text", []),
    "stdout_torch_npu_aclnn_EZ9999_no_op_binary.txt":
        ("torch_npu", [
            ('error_code', 'ERR01100'),
            ('error_code', 'EZ9999'),
            ('op_binary_missing', 'Range'),
        ]),
    "stdout_torch_npu_cpu_fallback_ERR01007.txt":
        ("torch_npu", [
            ('cpu_fallback', 'aten::linalg_lstsq.out'),
            ('error_code', 'ERR01007'),
        ]),
    "stdout_torch_npu_dynamic_profiler_log.txt": ("text", []),
    "stdout_torch_npu_init_500001_ERR00100.txt":
        ("torch_npu", [
            ('error_code', '500001'),
            ('error_code', 'ERR00100'),
            ('npu_call_failed', 'at_npu::native::AclSetCompileopt(aclCompileOpt::AC'),
        ]),
    "stdout_vllm_ascend_507011_event_query_EL0003.txt":
        ("torch_npu", [
            ('error_code', '507011'),
            ('error_code', 'EL0003'),
            ('error_code', 'ERR00100'),
            ('npu_call_failed', 'acl::AclQueryEventRecordedStatus(event_, &currStat'),
        ]),
    "stdout_vllm_ascend_EZ9999_tiling_check.txt": ("cann-error", [('error_code', 'EZ9999')]),
    "stdout_ray_train_pid_EI0002_507048_vllm-ascend-1443.txt":
        ("torch_npu", [('error_code', '507048'), ('error_code', 'EI0002'), ('error_code', 'ERR00100'),
                       ('hccl_timeout', 'notify wait'), ('npu_call_failed', 'AclrtSynchronizeDeviceWithTimeout')]),
    "stdout_ray_taskrunner_EJ0001_hccp_init_ERR02200_verl-332.txt":
        ("torch_npu", [('error_code', 'EJ0001'), ('error_code', 'ERR02200'), ('error_code', 'HCCL 7')]),
    "stdout_vllm_ascend_EI0002_remote_rank_24_RankID101_vllm-ascend-3413.txt":
        ("torch_npu", [('error_code', 'EI0002'), ('error_code', 'ERR00100'), ('hccl_timeout', 'notify wait')]),
    "stdout_vllm_ascend_aclgraph_capture_207008.txt":
        ("torch_npu", [
            ('error_code', '207008'),
            ('error_code', 'EL0009'),
            ('npu_call_failed', 'c10_npu::acl::AclmdlRICaptureBegin(capture_stream_'),
        ]),
    "hccl_EI0001_HCCL_SOCKET_IFNAME-not-found_plog_hccl-doc.txt": ("plog", [('error_record', 'HCCL')]),
    "hccl_EI0001_env-invalid_HCCL_RDMA_SL_plog_hccl-doc.txt":
        ("plog", [
            ('error_code', '0x05000001'),
            ('error_record', 'HCCL'),
        ]),
    "hccl_EI0001_env-invalid_HCCL_RDMA_SL_screen_hccl-doc.txt": ("cann-error", [('error_code', 'EI0001')]),
    "hccl_EI0002_notify-wait-timeout_507048_torch_npu-doc.txt":
        ("cann-error", [
            ('error_code', '507048'),
            ('error_code', 'EI0002'),
            ('hccl_link', 'heartbeat lost'),
            ('hccl_timeout', 'notify wait'),
        ]),
    "hccl_EI0004_ranktable-not-valid-real-path_hccl-doc.txt": ("plog", [('error_code', '0x05010001')]),
    "hccl_EI0004_ranktable-super_device_id-invalid_A3_hccl-doc.txt": ("plog", [('error_code', '0x05010001')]),
    "hccl_EI0006_GettingSocketTimesOut_old-format_CANN8.0.RC2_LlamaFactory-5071.txt":
        ("cann-error", [
            ('cpu_fallback', 'aten::isin.Tensor_Tensor_out'),
            ('error_code', 'EI0006'),
            ('hccl_timeout', 'socket setup'),
        ]),
    "hccl_EI0006_HcclAllreduce-error-code-6_ERR01100_vllm-ascend-486.txt":
        ("torch_npu", [
            ('error_code', 'EI0006'),
            ('error_code', 'ERR01100'),
            ('hccl_timeout', 'socket setup'),
            ('npu_call_failed', 'HcclAllreduce'),
        ]),
    "hccl_EI0006_socket-establish-timeout_LINK_ERROR_INFO_hccl-doc.txt":
        ("plog", [
            ('error_code', '0x00000009'),
            ('error_code', '0x05010009'),
            ('error_record', 'HCCL'),
            ('hccl_link', 'link setup'),
            ('hccl_timeout', 'socket setup'),
        ]),
    "hccl_EI0019_host-port-bind-fail_plog_hccl-doc.txt":
        ("plog", [
            ('error_record', 'HCCL'),
            ('hccl_link', 'port bind'),
        ]),
    "hccl_EI0019_host-port-bind-fail_screen_hccl-doc.txt":
        ("cann-error", [
            ('error_code', 'EI0019'),
            ('hccl_link', 'port bind'),
        ]),
    "hccl_TaskExecStage_HeartbeatLost_ClusterExceptionLocation_hccl-doc.txt":
        ("plog", [
            ('hccl_link', 'heartbeat lost'),
        ]),
    "hccl_TaskExecStage_StuckOccurred_hccl-doc.txt": ("plog", [('hccl_link', 'stuck')]),
    "hccl_TaskExecStage_TaskRunFailed_Timeout_hccl-doc.txt": ("plog", [('hccl_timeout', 'task execution')]),
    "hccl_topo-exchange-agent-socket-timeout_rootinfo_hccl-doc.txt":
        ("plog", [
            ('hccl_link', 'connect to root'),
            ('hccl_timeout', 'socket setup'),
        ]),
    # `ret is -8020` (DCMI_ERR_CODE_RESOURCE_OCCUPIED) and `because the device is used`
    "npu-smi_fail_dcmi-8020_device-used_cann-container-image-46.txt":
        ("cann-error", [('device_busy', 'device held by another process'), ('error_code', '-8020')]),
    "npu-smi_fail_dcmi-8020_plus_toolkit-info_8.0.0_collect_env-noise_vllm-ascend-632.txt":
        ("cann-error", [('device_busy', 'device held by another process'), ('error_code', '-8020')]),
    "npu-smi_fail_libc_sec.so-missing_in-container_HAMi-615.txt":
        ("text", [
            ('missing_library', 'libc_sec.so'),
        ]),
    "npu-smi_fail_no-such-file-in-container_PaddleX-4542.txt": ("text", [('error_line', 'error line')]),
    "torch_npu_507011_AclrtSynchronizeStreamWithTimeout_E39999_AICPU_MoeDistributeDispatchV2_vllm-ascend-4256.txt":
        ("torch_npu", [
            ('aicpu_exception', 'AI CPU kernel'),
            ('error_code', '507011'),
            ('error_code', 'E39999'),
            ('error_code', 'ERR00100'),
            ('npu_call_failed', 'c10_npu::acl::AclrtSynchronizeStreamWithTimeout(co'),
        ]),
    "torch_npu_507035_AclrtSynchronizeStreamWithTimeout_vector-core_Ascend-pytorch-66.txt":
        ("torch_npu", [
            ('aicore_exception', 'vector core exception'),
            ('error_code', '507035'),
            ('error_code', 'ERR00100'),
            ('npu_call_failed', 'c10_npu::acl::AclrtSynchronizeStreamWithTimeout(co'),
        ]),
    "shell_job_messages_bash5.2_dash0.5.12.txt":
        ("text", [
            ('command_not_found', 'atc'),
            ('ended_by_signal', 'Aborted'),
            ('ended_by_signal', 'Killed'),
            ('ended_by_signal', 'Segmentation fault'),
            ('tool_failed', 'atc'),
        ]),
    "torch_npu_EH9999_init-env-failed_500001_Aborted_Ascend-pytorch-7.txt":
        ("cann-error", [
            ('ended_by_signal', 'Aborted'),
            ('error_code', '500001'),
            ('error_code', 'EH9999'),
        ]),
    "torch_npu_EZ9999_CannotFindBinOfOp_ERR01100_torch_npu-doc.txt":
        ("torch_npu", [
            ('error_code', 'ERR01100'),
            ('error_code', 'EZ9999'),
            ('op_binary_missing', 'Range'),
        ]),
    "torch_npu_EZ9999_InnerError_MLA-tiling_vllm-ascend-faq.txt": ("cann-error", [('error_code', 'EZ9999')]),
    "torch_npu_cpu-fallback-warning_ERR01007_torch_npu-doc.txt":
        ("torch_npu", [
            ('cpu_fallback', 'aten::linalg_lstsq.out'),
            ('error_code', 'ERR01007'),
        ]),
    "torch_npu_ext_undefined-symbol_AclrtPeekAtLastError_dlinfer-183.txt":
        ("text", [
            ('undefined_symbol', '_ZN7c10_npu3acl20AclrtPeekAtLastErrorE17aclrtLastE'),
        ]),
    "torch_npu_ext_undefined-symbol_NpuRunMode_mmcv-3299.txt":
        ("text", [
            ('undefined_symbol', '_ZN7c10_npu10NpuRunMode9cur_mode_E'),
        ]),
    "torch_npu_import_libhccl.so_missing_torch_npu-faq.txt": ("text", [('error_line', 'error line')]),
    "torch_npu_import_torch_npu._C_ModuleNotFound_torch_npu-faq.txt":
        ("text", [
            ('missing_module', 'torch_npu._C'),
        ]),
    "torch_npu_init_AclSetCompileopt_500001_ERR00100_torch_npu-doc.txt":
        ("torch_npu", [
            ('error_code', '500001'),
            ('error_code', 'ERR00100'),
            ('npu_call_failed', 'at_npu::native::AclSetCompileopt(aclCompileOpt::AC'),
        ]),
    "torch_npu_to-int-device_Torch-not-compiled-with-CUDA_Ascend-pytorch-16.txt":
        ("text", [('error_line', 'error line')]),
    "torch_npu_transfer_to_npu_ImportWarning_accelerate-3020.txt": ("text", []),
    "torch_npu_whl_not_supported_platform_torch_npu-faq.txt": ("text", []),
    "atc_success_W11001_constructed.txt":
        ("atc", [
            ('atc_success', 'atc'),
            ('error_code', 'W11001'),
            ('slow_operator', 'Gather_12'),
            ('slow_operator', 'Slice_29'),
        ]),
    "plog_debug_engine_placement_constructed.log":
        ("plog", [
            ('op_rejected', 'DropOutGenMask'),
            ('aicpu_placed', 'DropOutGenMask'),
            ('error_code', 'EZ3003'),
            ('host_cpu_placed', 'Shape'),
            ('no_engine', 'ComplexAbs'),
        ]),
    "stdout_EZ3003_engine_chain_constructed.txt":
        ("cann-error", [("error_code", "EZ3003"), ("no_engine", "TransData"), ("op_rejected", "TransData")]),
    "ranktable_json_A3_v1.2_super_device_id_mindie-pod-log_mindcluster-doc.txt": ("text", []),
    "driver_install_run_full_25.0.rc1.1_Atlas800IA2_wangjunjian-blog.txt": ("text", []),
    # a user program's check macro `failed: 507035`; the device's `error code = 0x4000000000000000` is no code
    "stdout_aclrt_failed_507035_EZ9999_aivec_PTOAS-808.txt":
        ("cann-error", [('error_code', '507035'), ('error_code', 'EZ9999'), ('error_code', '0x31'),
                        ('aicore_exception', 'vector core exception')]),
    "stdout_exception_stream_error_code_0x26_LlamaFactory-3670.txt": ("cann-error", [('error_code', '0x26')]),
    "stdout_torch_npu_error_code_is_107027_Ascend-pytorch-77.txt": ("cann-error", [('error_code', '107027')]),
    "torch_npu_hccl_watchdog_timeout_vllm-ascend-382.txt": ("text", [('hccl_timeout', 'ALLREDUCE')]),
    "stdout_ge_graph_build_op_failures_constructed.txt":
        ("cann-error", [('error_code', 'EZ9999'), ('error_code', 'E20001'), ('error_code', 'E40021'),
                        ('op_build_failed', 'MatMulV2'), ('op_compile_failed', 'Conv2D'),
                        ('op_compile_failed', 'Cast')]),
    "stdout_torch_npu_cpu_fallback_hard-wrapped_constructed.txt":
        ("text", [('cpu_fallback', 'aten::linalg_lstsq.out'), ('cpu_fallback', 'aten::_unique2'),
                       ('cpu_fallback', 'aten::isin.Tensor_Tensor_out'), ('cpu_fallback', 'aten::nonzero'),
                       ('cpu_fallback', 'aten::histc'), ('cpu_fallback', 'aten::bucketize.Tensor')]),
    "torch_npu_import_libhccl.so_ImportError_constructed.txt": ("text", [('missing_library', 'libhccl.so')]),
    # issue 31: ATC and operator compile failures name the operator; codes in any company; errors without a
    # code; pastes; MindSpore and MindSpore Lite
    "atc_E10001_glued_after_more_information_blog.txt": ("atc", [('atc_failed', 'atc'), ('error_code', 'E10001')]),
    "atc_E20001_StridedSliceD_failed_to_compile_op_qwen-ascend-llm-11.txt":
        ("atc", [('atc_failed', 'atc'), ('error_code', 'E20001'), ('op_compile_failed', 'StridedSliceD')]),
    "torchair_E89999_InferShape_Transpose_graph-compile-doc.txt":
        ("cann-error", [('error_code', 'E89999'), ('infershape_failed', 'Transpose')]),
    "torch_npu_EZ9999_InferShape_BatchMatMul_glued_progress_Ascend-pytorch-42.txt":
        ("cann-error", [('error_code', 'EZ9999'), ('error_code', '500002'), ('error_code', '1343242270'),
                        ('infershape_failed', 'BatchMatMul')]),
    "mindspore_E80000_StridedSliceGradD_tbe_compile_mindspore-docs.txt":
        ("mindspore", [('error_code', 'E80000'), ('op_compile_failed', 'StridedSliceGradD')]),
    "mindspore_EB0000_Transpose_TVMError_mindspore-docs.txt":
        ("mindspore", [('error_code', 'EB0000'), ('error_record', 'KERNEL'), ('op_compile_failed', 'Transpose')]),
    "mindspore_EE1001_rtSetDevice_ret107001_mindspore-docs.txt":
        ("cann-error", [('device_open_failed', 'open device'), ('error_code', '107001'), ('error_code', 'EE1001')]),
    "mindspore_EE9999_halMemAlloc_drvRetCode_ret207001_mindspore-docs.txt":
        ("mindspore", [('device_busy', 'device held by another process'), ('device_oom', 'device memory'),
                       ('error_code', '207001'), ('error_code', 'DRV 6'), ('error_code', 'EE9999'),
                       ('error_record', 'DEVICE')]),
    "mindspore_EE9999_task_failed_plog_interleaved_mindspore-docs.txt":
        ("mindspore", [('device_task_failed', 'device task'), ('error_code', '507011'), ('error_code', 'EE9999'),
                       ('error_code', '0x91'), ('error_code', 'EE8888'), ('error_record', 'RUNTIME')]),
    "mindspore_device_held_free_memory_less_than_half_mindspore-docs.txt":
        ("mindspore", [('device_busy', 'device held by another process'), ('error_record', 'DEVICE')]),
    "mindspore_lite_benchmark_acl_open_device_failed_IERROR_mindocr-faq.txt":
        ("mindspore", [('device_open_failed', 'open device'), ('error_record', 'ME')]),
    "mindspore_E39999_open_device_507033_typed_slips_mindocr-faq.txt":
        ("cann-error", [('device_open_failed', 'open device'), ('error_code', 'E39999'), ('error_code', '507033')]),
    "mindspore_undefined_symbol_no_space_mindocr-faq.txt":
        ("text", [('undefined_symbol', '_ZN9mindspore5tracel15GetDebugInfostrERKSt10shared')]),
    "mindspore_device_address_type_wrong_pid_tid_mindocr-faq.txt": ("mindspore", [('error_line', 'error line')]),
    "stdout_http500_json_escaped_EZ9999_constructed.txt":
        ("cann-error", [('error_code', 'EZ9999'), ('error_code', '500002'), ('infershape_failed', 'BatchMatMul')]),
    "torch_npu_E60108_Conv3DTranspose_compile_op_failed_Ascend-pytorch-52.txt":
        ("torch_npu", [('error_code', 'E60108'), ('error_code', '500002'), ('error_code', 'ERR00100'),
                       ('failing_operator', 'Conv3DTranspose'), ('op_compile_failed', 'Conv3DTranspose'),
                       ('op_compile_failed', 'Conv3DBackpropInput')]),
    "torch_npu_E90003_TransData_bf16_compile_op_failed_wrapped_Ascend-pytorch-148.txt":
        ("cann-error", [('error_code', 'E90003'), ('error_code', '500002'), ('op_compile_failed', 'TransData')]),
    "mindspore_EZ9999_aicore_Add-op8_dump_node_mindspore-docs.txt":
        ("mindspore", [('aicore_exception', 'add_13570952190744021808_0__kernel0'),
                       ('device_task_failed', 'device task'), ('error_code', '507011'), ('error_code', 'EZ9999'),
                       ('error_record', 'SESSION'), ('failing_operator', 'Default/Add-op8')]),
    "mindspore_ValueError_For_MatMul_MindAct-986.txt": ("text", [('op_input_invalid', 'MatMul')]),
    "ais_bench_acl_open_device_0_failed_EL003_507033_faq.txt":
        ("cann-error", [('device_open_failed', 'open device'), ('error_code', '507017'), ('error_code', '507033'),
                        ('error_code', 'E39999')]),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample_findings(name: str) -> None:
    expected_format, expected = EXPECTED[name]
    scanner = Scanner()
    summary = scanner.scan_bytes(name, sample_data(name))
    found = {(f.kind, f.subject[:50]) for f in scanner.result().findings if f.kind != "warning_record"}
    assert summary.status == "ok"
    assert summary.format == expected_format
    assert found == set(expected)


LOG_LIKE = ("atc_", "plog_", "slog_", "device_", "stdout_", "torch_npu_", "hccl_E", "hccl_T", "mindspore_",
            "torchair_", "ais_bench_")


def test_every_copied_sample_has_expectations() -> None:
    """Every log and error text copied for these tests has expectations (constructed ones too; the other
    stages' constructed inputs, such as npu-smi tables, are not logs)."""
    copied = {p.name for folder in (SAMPLES / "logs", SAMPLES / "system") for p in folder.iterdir()
              if p.name.endswith((".log", ".txt"))}
    copied |= {p.name for p in CONSTRUCTED.iterdir() if p.name.startswith(LOG_LIKE)}
    assert copied == set(EXPECTED)


def test_every_shared_log_sample_is_covered_and_scans_in_one_pass() -> None:
    """Every real log sample (copied from ../shared/samples/logs) has expectations here; all scan without
    trouble."""
    shared = sorted(p for p in (SAMPLES / "logs").iterdir()
                    if p.name != "INDEX.md" and not p.name.startswith("prof_"))
    assert {p.name for p in shared} <= set(EXPECTED)
    scanner = Scanner()
    for path in shared:
        scanner.scan_bytes(path.name, sample_bytes(path))
    result = scanner.result()
    assert all(f.status == "ok" for f in result.files)
    # Merged across files: one finding per cause, with its first and last place.
    vector = next(f for f in result.findings
                  if f.kind == "aicore_exception" and f.subject == "vector core exception")
    assert vector.first.file != vector.last.file
    assert vector.count == sum(
        1 for p in shared for line in sample_bytes(p).decode("utf-8", "replace").splitlines()
        if "vector core exception" in line or "there is an aivec error" in line)


def _finding(name: str, kind: str, subject: str):
    scanner = Scanner()
    scanner.scan_bytes(name, sample_data(name))
    (found,) = [f for f in scanner.result().findings if (f.kind, f.subject) == (kind, subject)]
    return found


def test_ge_exception_dump_at_event_level_names_the_operator() -> None:
    """issue 17 point 4: the RUN plog of the msaicerr test data holds GE's dump of the AI Core exception at
    EVENT level; `logs scan` said "nothing found"."""
    found = _finding("plog_run_event_cann64_910A.log", "aicore_exception", "GatherV2")
    assert found.details == {"op": {"GatherV2"}, "op_type": {"GatherV2"}, "stream": {"2"}, "task": {"6"}}
    assert found.first.line == 248 - 5  # the sample's line 248, after its 5 header lines


def test_hccl_watchdog_timeout_carries_op_seq_timeout_and_ranks() -> None:
    found = _finding("torch_npu_hccl_watchdog_timeout_vllm-ascend-382.txt", "hccl_timeout", "ALLREDUCE")
    assert found.details["seq"] == {"196"} and found.details["timeout_ms"] == {"3600000"}
    assert found.details["rank"] == {"0", "1"}
    assert "Watchdog" in found.title or "watchdog" in found.title


def test_graph_build_failures_name_the_operator_type() -> None:
    name = "stdout_ge_graph_build_op_failures_constructed.txt"
    assert _finding(name, "op_build_failed", "MatMulV2").details == {"op": {"model/dense/MatMul"},
                                                                      "op_type": {"MatMulV2"}}
    assert _finding(name, "op_compile_failed", "Conv2D").details == {"op": {"Conv2D_1"}, "op_type": {"Conv2D"}}
    assert _finding(name, "op_compile_failed", "Cast").details["op"] == {"Cast_3"}


def test_hard_wrapped_fallback_warnings_point_at_their_first_line() -> None:
    """Wrapped mid-word at 80, 100 and 40 columns, at spaces, without the [W ...] prefix, glued after a
    progress bar: each warning is one finding at the line its operator's name starts on."""
    name = "stdout_torch_npu_cpu_fallback_hard-wrapped_constructed.txt"
    scanner = Scanner()
    summary = scanner.scan_bytes(name, sample_data(name))
    lines = {f.subject: f.first.line for f in scanner.result().findings}
    assert lines == {"aten::linalg_lstsq.out": 2, "aten::_unique2": 5, "aten::isin.Tensor_Tensor_out": 8,
                     "aten::nonzero": 12, "aten::histc": 15, "aten::bucketize.Tensor": 18}
    assert summary.lines == sample_data(name).count(b"\n")  # joining keeps the line count
