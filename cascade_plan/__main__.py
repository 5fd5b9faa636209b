from cascade_plan.cli.app import main

main()
