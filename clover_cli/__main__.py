from clover_cli.main import main

main()
