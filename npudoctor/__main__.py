from npudoctor.cli import main

main()
