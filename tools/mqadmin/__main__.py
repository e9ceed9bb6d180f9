from tools.mqadmin import main

main()
