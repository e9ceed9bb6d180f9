from rocketmq_py.tools.mqadmin import main

main()
