from rocketmq_py.tools.dashboard.startup import cli

cli()
