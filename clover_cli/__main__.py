from clover.main import main

main()
