from cascade_plan.cli import main

main()
