from rocketmq_py.tools.dashboard import main

main()
