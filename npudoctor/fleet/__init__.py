"""The fleet room: acceptance runs, the fleet view over many reports, site profiles derived from a good node,
the collective probe, demo scenarios and atomic textfile output. The core never imports it."""
