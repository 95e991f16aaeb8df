from venturi.cli import main

main()
