from cascade_plan.cli.entry import main

main()
