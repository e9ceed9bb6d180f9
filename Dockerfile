# rocketmq-py: NameServer, Broker and the operator tools in one image, installed from this repo.
# docker-compose.yml runs one NameServer and two brokers from it; `docker build -t rocketmq-py .`
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    ROCKETMQ_HOME=/home/rocketmq

WORKDIR /opt/rocketmq-py
# Dependencies first, so editing the source does not reinstall them.
COPY pyproject.toml setup.py README.md ./
COPY rocketmq_py ./rocketmq_py
COPY conf ./conf
COPY common ./common
COPY remoting ./remoting
COPY acl ./acl
COPY namesrv ./namesrv
COPY store ./store
COPY broker ./broker
COPY client ./client
COPY tools ./tools
RUN pip install .

RUN useradd --create-home --home-dir /home/rocketmq rocketmq \
    && mkdir -p /home/rocketmq/store /home/rocketmq/namesrv \
    && chown -R rocketmq:rocketmq /home/rocketmq
USER rocketmq
WORKDIR /home/rocketmq

# NameServer; broker-a, broker-b and their slaves (2m-2s-*): listen + fast ports.
EXPOSE 9876 10909 10911 10913 10915 10919 10921 10923 10925
CMD ["mqnamesrv", "-c", "/opt/rocketmq-py/conf/namesrv.conf"]
