# The production shape on one machine, sourced by deploy/stack when
# RATEWIRE_STACK_TOPOLOGY=cluster (docs/operations.md, "The cluster
# topology"). Every piece is a real component, each with its data under
# .stack/ and a pid file, so the nemesis can kill, pause and restart it:
#
#   Kafka     broker-1..3: KRaft nodes (broker and controller each) on
#             BROKER_PORT, +2, +4 (controllers +1); the topic has replication
#             3, min.insync.replicas 2 and RATEWIRE_STACK_PARTITIONS partitions
#   Redis     redis-1..6 on REDIS_PORT..+5 (cluster bus 1000 above): a
#             Cluster of three primaries, each with a replica
#   Postgres  pg_auto_failover: a monitor on PG_PORT-1, a primary on PG_PORT
#             and a streaming hot standby on PG_PORT+1; HAProxy sends writers
#             to whichever is primary (PG_PORT-2) and readers of history to
#             the standby (PG_PORT+2)
#   HAProxy   API on API_PORT and ingest on INGEST_PORT, their operator
#             listeners on API_OPERATOR_PORT and INGEST_OPERATOR_PORT, its
#             own statistics on HAPROXY_STATS_PORT
#   processes api-1..2, ingest-1..2 (each on ports of its own, below) and
#             RATEWIRE_STACK_PROJECTORS projectors (3 by default)

CLUSTER_BROKERS=3
CLUSTER_APIS=2
CLUSTER_INGESTS=2
REDIS_NODES=6
PARTITIONS=${RATEWIRE_STACK_PARTITIONS:-6}
# Three JVMs share the machine with everything else: each gets less than
# the single broker's heap (a node's working set here is well under it).
CLUSTER_KAFKA_HEAP=${RATEWIRE_CLUSTER_KAFKA_HEAP:-320m}
PG_MONITOR_PORT=$((PG_PORT - 1))
PG_STANDBY_PORT=$((PG_PORT + 1))
PG_WRITE_PORT=$((PG_PORT - 2))
PG_READ_PORT=$((PG_PORT + 2))
HAPROXY_STATS_PORT=$((8404 + PORT_OFFSET))

cluster_broker_port() { echo $((BROKER_PORT + 2 * ($1 - 1))); }
cluster_redis_port() { echo $((REDIS_PORT + $1 - 1)); }
# Instance i of the API and ingest listens on 8180 + 100 (i - 1) (API) and
# 8181 + ... (ingest), their operator listeners on 9180 + ... and 9181 + ...
cluster_api_port() { echo $((API_PORT + 100 * $1)); }
cluster_ingest_port() { echo $((INGEST_PORT + 100 * $1)); }
cluster_api_operator_port() { echo $((API_OPERATOR_PORT + 100 * $1)); }
cluster_ingest_operator_port() { echo $((INGEST_OPERATOR_PORT + 100 * $1)); }

cluster_brokers() {
    local i list=()
    for i in $(seq 1 $CLUSTER_BROKERS); do list+=("127.0.0.1:$(cluster_broker_port "$i")"); done
    (IFS=,; echo "${list[*]}")
}

cluster_redis_url() {
    local i list=()
    for i in $(seq 1 $REDIS_NODES); do list+=("127.0.0.1:$(cluster_redis_port "$i")"); done
    (IFS=,; echo "redis-cluster://${list[*]}")
}

# A port the cluster needs is taken by something it did not start.
cluster_check_ports() {
    local port name
    for name in $(seq 1 $CLUSTER_BROKERS); do
        pid_of "broker-$name" >/dev/null && continue
        for port in $(cluster_broker_port "$name") $(($(cluster_broker_port "$name") + 1)); do
            port_open 127.0.0.1 "$port" && die "port $port (Kafka node $name) is taken by something else; stop it, or set RATEWIRE_STACK_PORT_OFFSET"
        done
    done
    for name in $(seq 1 $REDIS_NODES); do
        port=$(cluster_redis_port "$name")
        pid_of "redis-$name" >/dev/null && continue
        port_open 127.0.0.1 "$port" && die "port $port (Redis node $name) is taken by something else; stop it, or set RATEWIRE_STACK_PORT_OFFSET"
        port_open 127.0.0.1 "$((port + 1000))" && die "port $((port + 1000)) (Redis node $name's cluster bus) is taken by something else; stop it, or set RATEWIRE_STACK_PORT_OFFSET"
    done
    return 0
}

# --- Kafka ----------------------------------------------------------------------

cluster_start_kafka() {
    local i
    [[ -s $STACK_DIR/kafka-cluster-id ]] || kafka_cluster_id >"$STACK_DIR/kafka-cluster-id"
    for i in $(seq 1 $CLUSTER_BROKERS); do cluster_start_broker "$i"; done
    # Every node is started before any is waited for: none takes
    # connections before the controllers have a quorum.
    for i in $(seq 1 $CLUSTER_BROKERS); do
        wait_kafka "broker-$i" "$(cluster_broker_port "$i")" 900
    done
}

# cluster_start_broker I: starts Kafka node I (unless it runs), not waiting.
cluster_start_broker() {
    local i=$1 j voters=() port
    for j in $(seq 1 $CLUSTER_BROKERS); do
        voters+=("$j@127.0.0.1:$(($(cluster_broker_port "$j") + 1))")
    done
    port=$(cluster_broker_port "$i")
    RATEWIRE_KAFKA_CGROUP=$(nemesis_cgroup "broker-$i") RATEWIRE_KAFKA_NODE_ID=$i RATEWIRE_KAFKA_VOTERS=$(IFS=,; echo "${voters[*]}") \
        RATEWIRE_KAFKA_CLUSTER_ID=$(cat "$STACK_DIR/kafka-cluster-id") RATEWIRE_KAFKA_REPLICATION=3 \
        RATEWIRE_KAFKA_HEAP=$CLUSTER_KAFKA_HEAP \
        start "broker-$i" "$ROOT" "$ROOT/deploy/stack" kafka-exec "$STACK_DIR/broker-$i" "$port" "$((port + 1))"
}

# --- Redis ----------------------------------------------------------------------

redis_cli() { redis-cli -h 127.0.0.1 -p "$1" "${@:2}"; }

cluster_start_redis() {
    need redis-server redis-server "the cluster's Redis nodes"
    need redis-cli redis-tools "to form the Redis Cluster"
    local i
    for i in $(seq 1 $REDIS_NODES); do cluster_start_redis_node "$i"; done
    for i in $(seq 1 $REDIS_NODES); do wait_redis_node "$i"; done
    if ! redis_cli "$REDIS_PORT" cluster info 2>/dev/null | grep -q '^cluster_known_nodes:6'; then
        local nodes=()
        for i in $(seq 1 $REDIS_NODES); do nodes+=("127.0.0.1:$(cluster_redis_port "$i")"); done
        say "forming the Redis Cluster: ${nodes[*]} (three primaries, a replica each)"
        redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes \
            >"$STACK_DIR/redis-cluster-create.log" 2>&1 || {
            tail -n 20 "$STACK_DIR/redis-cluster-create.log" >&2
            die "forming the Redis Cluster failed; see $STACK_DIR/redis-cluster-create.log"
        }
    fi
    for _ in $(seq 1 300); do
        redis_cli "$REDIS_PORT" cluster info 2>/dev/null | grep -q '^cluster_state:ok' && return
        sleep 0.1
    done
    die "the Redis Cluster is not ok; see redis-cli -p $REDIS_PORT cluster info"
}

# cluster_start_redis_node I: starts Redis node I unless it runs.
cluster_start_redis_node() {
    local i=$1 port dir
    port=$(cluster_redis_port "$i")
    dir=$STACK_DIR/redis-$i
    mkdir -p "$dir"
    pid_of "redis-$i" >/dev/null && return
    # A node fails over after 3 s unreachable (Redis's default: 15 s);
    # its appendonly file is synced each second, so a node killed and
    # restarted before its replica took over comes back with its data.
    # The cluster bus listens 1000 above the node (Redis's default, 10000
    # above, falls among the ephemeral ports at a port offset, where an
    # outgoing connection can hold it: a node then fails to start).
    start "redis-$i" "$dir" redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" \
        --cluster-enabled yes --cluster-port "$((port + 1000))" \
        --cluster-config-file nodes.conf --cluster-node-timeout 3000 \
        --appendonly yes --appendfsync everysec --save '' --maxmemory-policy noeviction
}

wait_redis_node() {
    local port
    port=$(cluster_redis_port "$1")
    for _ in $(seq 1 300); do redis_cli "$port" ping 2>/dev/null | grep -q PONG && return; sleep 0.1; done
    tail -n 20 "$STACK_DIR/redis-$1.log" >&2
    pid_of "redis-$1" >/dev/null || die "redis-$1 exited; see $STACK_DIR/redis-$1.log"
    die "redis-$1 does not answer on $port within 30 s; see $STACK_DIR/redis-$1.log"
}

# --- HAProxy --------------------------------------------------------------------

# Servers marked down are skipped within a second and a half; a read that
# finds a server gone or refusing is sent to the other (GETs only: a push is
# retried only when it never reached a server). A balancer with no server
# left answers 503 with Retry-After in the API's error format.
cluster_haproxy_config() {
    local i cfg=$STACK_DIR/haproxy.cfg errors=$STACK_DIR/haproxy-503.http
    printf '%s\r\n' 'HTTP/1.1 503 Service Unavailable' 'Content-Type: application/json' \
        'Retry-After: 1' 'Cache-Control: no-store' 'Connection: close' '' >"$errors"
    printf '%s\n' '{"status":503,"message":"Service Unavailable"}' >>"$errors"
    {
        cat <<EOF
global
    # Two descriptors a connection: within a usual limit of 20,000.
    maxconn 8000
    log stderr format raw local0 notice
    stats socket $STACK_DIR/haproxy.sock mode 600 level admin
    # The Postgres checks run psql (an external check forks).
    external-check
    insecure-fork-wanted

defaults
    log global
    option dontlognull
    timeout connect 1s
    timeout client 30s
    timeout server 30s
    timeout http-request 10s
    timeout http-keep-alive 10s
    timeout queue 5s
    timeout check 1s
    retries 2
    option redispatch
    # A request in flight to a server marked down runs to its answer or
    # its timeout (then the errorfile's 503 with Retry-After): cutting it
    # would leave its client with a closed connection and no answer.
    default-server inter 500ms fall 2 rise 2

frontend api
    mode http
    option httplog
    option dontlog-normal
    option log-separate-errors
    bind 127.0.0.1:$API_PORT
    maxconn 4000
    errorfile 502 $errors
    errorfile 503 $errors
    errorfile 504 $errors
    use_backend api-stream if { path_beg /api/v1/stream }
    default_backend api

backend api
    mode http
    balance leastconn
    option forwardfor
    option httpchk GET /healthz
    # A paused instance holds a request until this; then it goes to the other.
    timeout server 5s
    option http-buffer-request
    retry-on conn-failure empty-response junk-response response-timeout 503
    # A POST or PATCH that reached a dying instance may have been done:
    # sending it again could make a second webhook or alert.
    http-request disable-l7-retry if { method POST PATCH }
EOF
        for i in $(seq 1 $CLUSTER_APIS); do echo "    server api-$i 127.0.0.1:$(cluster_api_port "$i") check"; done
        cat <<EOF

backend api-stream
    mode http
    balance leastconn
    option forwardfor
    option httpchk GET /healthz
    # A live stream sends a heartbeat every 15 s.
    timeout server 40s
    timeout tunnel 1h
    # Streams on a server marked down are closed, so that their clients
    # reconnect (with Last-Event-ID) to the other at once.
    default-server inter 500ms fall 2 rise 2 on-marked-down shutdown-sessions
EOF
        for i in $(seq 1 $CLUSTER_APIS); do echo "    server api-$i 127.0.0.1:$(cluster_api_port "$i") check"; done
        cat <<EOF

frontend ingest
    mode http
    option httplog
    option dontlog-normal
    option log-separate-errors
    bind 127.0.0.1:$INGEST_PORT
    maxconn 2000
    errorfile 502 $errors
    errorfile 503 $errors
    errorfile 504 $errors
    default_backend ingest

backend ingest
    mode http
    balance leastconn
    option forwardfor
    option httpchk GET /healthz
    # Ingest answers within its publish timeout (5 s); a publisher hears
    # 503 with Retry-After after 8 s at most, never silence.
    timeout server 8s
    # A push whose ingest dies before answering goes to the other one:
    # HAProxy would otherwise close a kept-alive client connection without
    # an answer. That needs the whole request in hand before it is sent (a
    # board up to the 16 KB buffer, about 140 currencies with both pairs);
    # a push sent again publishes the same event id under its
    # Idempotency-Key.
    option http-buffer-request
    retry-on conn-failure empty-response
    retries 3
    option redispatch 1
EOF
        for i in $(seq 1 $CLUSTER_INGESTS); do echo "    server ingest-$i 127.0.0.1:$(cluster_ingest_port "$i") check"; done
        for kind in api ingest; do
            local port count
            if [[ $kind == api ]]; then port=$API_OPERATOR_PORT count=$CLUSTER_APIS; else port=$INGEST_OPERATOR_PORT count=$CLUSTER_INGESTS; fi
            cat <<EOF

listen $kind-operator
    mode http
    bind 127.0.0.1:$port
    option httpchk GET /healthz
EOF
            for i in $(seq 1 "$count"); do
                echo "    server $kind-$i 127.0.0.1:$(cluster_${kind}_operator_port "$i") check"
            done
        done
        cluster_haproxy_postgres
        cat <<EOF

listen stats
    mode http
    bind 127.0.0.1:$HAPROXY_STATS_PORT
    stats enable
    stats uri /
    stats refresh 5s
EOF
    } >"$cfg"
}

cluster_start_haproxy() {
    need haproxy haproxy "the cluster's balancer"
    cluster_haproxy_config
    haproxy -c -q -f "$STACK_DIR/haproxy.cfg" || die "HAProxy refuses $STACK_DIR/haproxy.cfg"
    start haproxy "$ROOT" haproxy -db -f "$STACK_DIR/haproxy.cfg"
}

# --- processes ------------------------------------------------------------------

cluster_env() {
    export RATEWIRE_DATABASE_URL="postgres://$PG_USER@127.0.0.1:$PG_WRITE_PORT/$DB_NAME"
    export RATEWIRE_READ_DATABASE_URL="postgres://$PG_USER@127.0.0.1:$PG_READ_PORT/$DB_NAME"
    RATEWIRE_REDIS_URL=$(cluster_redis_url)
    RATEWIRE_KAFKA_BROKERS=$(cluster_brokers)
    export RATEWIRE_REDIS_URL RATEWIRE_KAFKA_BROKERS
    export RATEWIRE_TOPIC_PARTITIONS=$PARTITIONS RATEWIRE_TOPIC_REPLICATION=3 RATEWIRE_TOPIC_MIN_INSYNC_REPLICAS=2
    # The balancer's X-Forwarded-For names the client.
    export RATEWIRE_TRUSTED_PROXIES=127.0.0.1
}

cluster_start_processes() {
    local bin=$1 i
    start_projectors "$bin"
    for i in $(seq 1 $CLUSTER_INGESTS); do cluster_start_process "ingest-$i" "$bin"; done
    for i in $(seq 1 $CLUSTER_APIS); do cluster_start_process "api-$i" "$bin"; done
    for i in $(seq 1 "$PROJECTORS"); do
        wait_ready "$(projector_name "$i")" "http://127.0.0.1:$(projector_port "$i")/readyz"
    done
    for i in $(seq 1 $CLUSTER_INGESTS); do wait_ready "ingest-$i" "http://127.0.0.1:$(cluster_ingest_port "$i")/readyz"; done
    for i in $(seq 1 $CLUSTER_APIS); do wait_ready "api-$i" "http://127.0.0.1:$(cluster_api_port "$i")/readyz"; done
    # Through the balancer too.
    wait_ready haproxy "http://127.0.0.1:$API_PORT/readyz"
    wait_ready haproxy "http://127.0.0.1:$INGEST_PORT/readyz"
}

# cluster_start_process NAME BIN: starts api-I or ingest-I unless it runs.
cluster_start_process() {
    local name=$1 bin=$2 i=${1##*-}
    case $name in
        ingest-*)
            RATEWIRE_INGEST_LISTEN=127.0.0.1:$(cluster_ingest_port "$i") \
                RATEWIRE_INGEST_OPERATOR_LISTEN=127.0.0.1:$(cluster_ingest_operator_port "$i") \
                start "$name" "$ROOT" "$bin/ratewire-ingest"
            ;;
        api-*)
            RATEWIRE_API_LISTEN=127.0.0.1:$(cluster_api_port "$i") \
                RATEWIRE_API_OPERATOR_LISTEN=127.0.0.1:$(cluster_api_operator_port "$i") \
                start "$name" "$ROOT" "$bin/ratewire-api"
            ;;
    esac
}

# cluster_restart NAME: starts one piece of the cluster again (after a
# kill) and waits until it serves; the nemesis heals its faults with it.
cluster_restart() {
    local name=$1 bin i
    bin=$(bin_dir)
    stack_env
    cluster_env
    case $name in
        api-[0-9]*)
            cluster_start_process "$name" "$bin"
            wait_ready "$name" "http://127.0.0.1:$(cluster_api_port "${name#api-}")/readyz"
            ;;
        ingest-[0-9]*)
            cluster_start_process "$name" "$bin"
            wait_ready "$name" "http://127.0.0.1:$(cluster_ingest_port "${name#ingest-}")/readyz"
            ;;
        projector | projector-[0-9]*)
            i=${name#projector}
            i=${i#-}
            i=${i:-1}
            start_projector "$i" "$bin"
            wait_ready "$name" "http://127.0.0.1:$(projector_port "$i")/readyz"
            ;;
        broker-[0-9]*)
            cluster_start_broker "${name#broker-}"
            wait_kafka "$name" "$(cluster_broker_port "${name#broker-}")" 900
            ;;
        redis-[0-9]*)
            cluster_start_redis_node "${name#redis-}"
            wait_redis_node "${name#redis-}"
            ;;
        haproxy) cluster_start_haproxy ;;
        *) die "deploy/stack restart: no piece named $name (api-N, ingest-N, projector[-N], broker-N, redis-N, haproxy)" ;;
    esac
}

# The processes of each kind, by name.
cluster_processes() {
    local i
    echo feed
    for i in $(seq 1 $CLUSTER_APIS); do echo "api-$i"; done
    for i in $(seq 1 $CLUSTER_INGESTS); do echo "ingest-$i"; done
    projector_names
}
cluster_brokers_named() { local i; for i in $(seq 1 $CLUSTER_BROKERS); do echo "broker-$i"; done; }
cluster_redis_named() { local i; for i in $(seq 1 $REDIS_NODES); do echo "redis-$i"; done; }

# Every process of the cluster by name, in the order `down` stops them.
cluster_names() {
    cluster_processes
    echo haproxy
    cluster_brokers_named
    cluster_redis_named
}

# Each kind stops at once, the processes first, the data last.
cluster_down() {
    nemesis_heal
    # shellcheck disable=SC2046
    stop_together $(cluster_processes)
    stop_named haproxy
    # shellcheck disable=SC2046
    stop_together $(cluster_brokers_named)
    nemesis_remove_cgroups
    # shellcheck disable=SC2046
    stop_together $(cluster_redis_named)
    cluster_stop_postgres
}

cluster_status() {
    local name pid url
    for name in $(cluster_names | tac) $(cluster_pg_names); do
        case $name in
            api-*) url=http://127.0.0.1:$(cluster_api_port "${name#api-}")/readyz ;;
            ingest-*) url=http://127.0.0.1:$(cluster_ingest_port "${name#ingest-}")/readyz ;;
            projector) url=http://127.0.0.1:$PROJECTOR_PORT/readyz ;;
            projector-*) url=http://127.0.0.1:$(projector_port "${name#projector-}")/readyz ;;
            *) url= ;;
        esac
        if pid=$(pid_of "$name"); then
            printf '%-12s running (pid %s) %s\n' "$name" "$pid" "$([[ -z $url ]] || curl -sS --max-time 2 "$url" 2>/dev/null || echo '(no answer)')"
        else
            printf '%-12s stopped\n' "$name"
        fi
    done
    if pid_of redis-1 >/dev/null; then
        printf '\nRedis Cluster (redis-cli -p %s cluster nodes):\n' "$REDIS_PORT"
        redis_cli "$REDIS_PORT" cluster nodes 2>/dev/null | awk '{print "  " $2, $3, $9}' | sed 's/@[0-9]*//' | sort -k1 || true
    fi
    cluster_pg_state
}

cluster_summary() {
    local i apis=() ingests=()
    for i in $(seq 1 $CLUSTER_APIS); do apis+=("$(cluster_api_port "$i")"); done
    for i in $(seq 1 $CLUSTER_INGESTS); do ingests+=("$(cluster_ingest_port "$i")"); done
    cat <<EOF

The cluster topology (deploy/stack status shows each piece):
  Kafka          $(cluster_brokers)   (replication 3, min.insync.replicas 2, $PARTITIONS partitions)
  Redis Cluster  $(cluster_redis_url)   (3 primaries, a replica each)
  Postgres       primary and standby on $PG_PORT and $PG_STANDBY_PORT (pg_auto_failover, monitor on $PG_MONITOR_PORT);
                 writers through HAProxy on $PG_WRITE_PORT, history readers on $PG_READ_PORT
  HAProxy        API $API_PORT -> ${apis[*]}, ingest $INGEST_PORT -> ${ingests[*]}, statistics http://127.0.0.1:$HAPROXY_STATS_PORT/
  projectors     $PROJECTORS (readiness on $(projector_port 1)..$(projector_port "$PROJECTORS"))
EOF
}

# --- Postgres: pg_auto_failover ---------------------------------------------------
#
# A monitor and two keepers (pg_autoctl), each the parent of its Postgres.
# They run as the postgres user (pg_autoctl refuses root) with their
# configuration, state and pid files beside the data (XDG_*), and start by
# exec (setpriv), so each pid file names the keeper itself.

PGAF_HOME=

pgaf_home() {
    [[ -z $PGAF_HOME ]] || return 0
    PGAF_HOME=$STACK_DIR/pgaf
    if [[ $(id -u) == 0 ]] && ! runuser -u postgres -- test -x "$STACK_DIR"; then
        # A checkout the postgres user cannot reach (a clone under /root).
        PGAF_HOME=/var/lib/postgresql/ratewire-$(printf '%s' "$STACK_DIR" | sha256sum | head -c 12)-pgaf
    fi
}

# The command prefix that runs a program as the postgres user with
# pg_autoctl's files under PGAF_HOME, by exec all the way.
pgaf_prefix() {
    PGAF_PREFIX=(env "XDG_CONFIG_HOME=$PGAF_HOME/xdg/config" "XDG_DATA_HOME=$PGAF_HOME/xdg/share"
        "XDG_RUNTIME_DIR=$PGAF_HOME/xdg/run" "PATH=$(pg_bindir):/usr/bin:/bin" HOME=/var/lib/postgresql)
    if [[ $(id -u) == 0 ]]; then
        PGAF_PREFIX=(setpriv --reuid=postgres --regid=postgres --init-groups "${PGAF_PREFIX[@]}")
    fi
}

# pgaf_env COMMAND...: COMMAND so, from / (the postgres user may not enter
# the current directory).
pgaf_env() {
    pgaf_prefix
    (cd / && exec "${PGAF_PREFIX[@]}" "$@")
}

pgaf() { pgaf_env pg_autoctl "$@"; }

cluster_pg_names() { echo pg-monitor pg-1 pg-2; }

cluster_pg_port() {
    case $1 in
        pg-monitor) echo "$PG_MONITOR_PORT" ;;
        pg-1) echo "$PG_PORT" ;;
        pg-2) echo "$PG_STANDBY_PORT" ;;
    esac
}

pg_at() { psql "host=127.0.0.1 port=$1 user=$PG_USER dbname=${2:-postgres} connect_timeout=1" -X -q -At -v ON_ERROR_STOP=1 "${@:3}"; }

# The monitor's view: each node's reported and assigned state.
cluster_pg_state() {
    pgaf_home
    [[ -d $PGAF_HOME/monitor ]] || return 0
    printf '\nPostgres (pg_autoctl show state):\n'
    pgaf show state --pgdata "$PGAF_HOME/monitor" 2>/dev/null | sed 's/^/  /' || true
}

# The monitor notices a node gone within 3 s and fails over 5 s after that
# (its defaults: 20 s and 30 s); replication notices a dead peer in 3 s.
# Keep wal_sender_timeout + the keeper's network partition timeout below
# node_considered_unhealthy_timeout + primary_demote_timeout, so an old
# primary cut off from everyone stops before its standby is promoted.
PGAF_MONITOR_SETTINGS="
ALTER SYSTEM SET pgautofailover.health_check_period = 1000;
ALTER SYSTEM SET pgautofailover.health_check_timeout = 1000;
ALTER SYSTEM SET pgautofailover.health_check_max_retries = 1;
ALTER SYSTEM SET pgautofailover.health_check_retry_delay = 500;
ALTER SYSTEM SET pgautofailover.node_considered_unhealthy_timeout = 3000;
ALTER SYSTEM SET pgautofailover.primary_demote_timeout = 5000;
ALTER SYSTEM SET pgautofailover.startup_grace_period = 5000;
SELECT pg_reload_conf();"
PGAF_NODE_SETTINGS="
ALTER SYSTEM SET wal_sender_timeout = '3s';
ALTER SYSTEM SET wal_receiver_timeout = '3s';
ALTER SYSTEM SET wal_receiver_status_interval = '1s';
ALTER SYSTEM SET wal_retrieve_retry_interval = '1s';
ALTER SYSTEM SET wal_keep_size = '256MB';
SELECT pg_reload_conf();"

wait_pg() {
    local port=$1 name=$2 db=${3:-postgres}
    for _ in $(seq 1 300); do
        pg_at "$port" "$db" -c 'SELECT 1' >/dev/null 2>&1 && return
        pid_of "$name" >/dev/null || { tail -n 20 "$STACK_DIR/$name.log" >&2; die "$name exited; see $STACK_DIR/$name.log"; }
        sleep 0.2
    done
    die "$name does not answer on $port; see $STACK_DIR/$name.log"
}

# pgaf_state NODE: the node's state as the monitor assigned it and as it
# reported it, e.g. "primary primary".
pgaf_state() {
    pg_at "$PG_MONITOR_PORT" pg_auto_failover -F ' ' \
        -c "SELECT reportedstate, goalstate FROM pgautofailover.node WHERE nodename = '$1'" 2>/dev/null
}

# The keeper writes its configuration file after the monitor has the
# node's state, and rewrites it now and then: a reader can catch it half
# written ("Failed to find section pg_autoctl"), so a setting is retried
# until the file parses.
pgaf_set() {
    local data=$1 name=$2 value=$3
    for _ in $(seq 1 50); do
        pgaf config set --pgdata "$data" "$name" "$value" >/dev/null 2>&1 && return
        sleep 0.2
    done
    pgaf config set --pgdata "$data" "$name" "$value" >/dev/null
}

cluster_start_postgres() {
    need pg_autoctl pg-auto-failover-cli "the cluster's Postgres failover"
    local bin version
    bin=$(pg_bindir) || true
    if [[ -z $bin ]] && can_install; then apt_install postgresql; bin=$(pg_bindir) || true; fi
    [[ -n $bin ]] || die "PostgreSQL's server is missing: install the package postgresql"
    version=$("$bin/postgres" --version | sed 's/[^0-9]*\([0-9]*\).*/\1/')
    if [[ ! -e /usr/lib/postgresql/$version/lib/pgautofailover.so ]]; then
        can_install && apt_install "postgresql-$version-auto-failover"
        [[ -e /usr/lib/postgresql/$version/lib/pgautofailover.so ]] ||
            die "pg_auto_failover's extension is missing: install the package postgresql-$version-auto-failover"
    fi
    pgaf_home
    local name port
    for name in $(cluster_pg_names); do
        port=$(cluster_pg_port "$name")
        pid_of "$name" >/dev/null && continue
        port_open 127.0.0.1 "$port" && die "port $port ($name) is taken by something else; stop it, or set RATEWIRE_STACK_PORT_OFFSET"
    done
    mkdir -p "$PGAF_HOME/xdg/config" "$PGAF_HOME/xdg/share" "$PGAF_HOME/xdg/run"
    if [[ $(id -u) == 0 ]]; then chown -R postgres: "$PGAF_HOME"; fi
    chmod 700 "$PGAF_HOME/xdg/run"
    local monitor_uri="postgres://autoctl_node@127.0.0.1:$PG_MONITOR_PORT/pg_auto_failover?sslmode=disable"

    if [[ ! -s $PGAF_HOME/monitor/PG_VERSION ]]; then
        say "creating the pg_auto_failover monitor in $PGAF_HOME/monitor"
        pgaf create monitor --pgctl "$bin/pg_ctl" --pgdata "$PGAF_HOME/monitor" --pgport "$PG_MONITOR_PORT" \
            --hostname 127.0.0.1 --auth trust --no-ssl >"$STACK_DIR/pg-monitor-create.log" 2>&1 || {
            tail -n 20 "$STACK_DIR/pg-monitor-create.log" >&2
            die "creating the monitor failed; see $STACK_DIR/pg-monitor-create.log"
        }
        pgaf config set --pgdata "$PGAF_HOME/monitor" postgresql.listen_addresses 127.0.0.1 >/dev/null
    fi
    pgaf_prefix
    start pg-monitor / "${PGAF_PREFIX[@]}" pg_autoctl run --pgdata "$PGAF_HOME/monitor"
    wait_pg "$PG_MONITOR_PORT" pg-monitor pg_auto_failover
    pg_at "$PG_MONITOR_PORT" pg_auto_failover <<<"$PGAF_MONITOR_SETTINGS" >/dev/null

    local i data
    for i in 1 2; do
        name=pg-$i
        port=$(cluster_pg_port "$name")
        data=$PGAF_HOME/node-$i
        if [[ -s $data/PG_VERSION && -s $PGAF_HOME/xdg/config/pg_autoctl$data/pg_autoctl.cfg ]]; then
            start "$name" / "${PGAF_PREFIX[@]}" pg_autoctl run --pgdata "$data"
        else
            if ((i == 1)) && [[ ! -s $data/PG_VERSION ]]; then
                # The first node is made here, so that its settings that need
                # a restart are there from the start (the standby copies them).
                pgaf_env "$bin/initdb" -D "$data" -U "$PG_USER" --auth=trust --encoding=UTF8 --no-locale \
                    >"$STACK_DIR/$name-init.log" 2>&1 || die "initdb failed; see $STACK_DIR/$name-init.log"
                printf '%s\n' "max_connections = 400" "listen_addresses = '127.0.0.1'" >>"$data/postgresql.conf"
            fi
            say "creating Postgres node $i (pg_auto_failover) in $data on port $port"
            start "$name" / "${PGAF_PREFIX[@]}" pg_autoctl create postgres --pgctl "$bin/pg_ctl" \
                --pgdata "$data" --pgport "$port" --listen 127.0.0.1 --hostname 127.0.0.1 \
                --name "node_$i" --username "$PG_USER" --auth trust --no-ssl --monitor "$monitor_uri" --run
        fi
        # The first node is primary (or single) before the second copies it.
        for _ in $(seq 1 600); do
            case $(pgaf_state "node_$i") in
                "primary primary" | "single single" | "secondary secondary" | "wait_primary wait_primary") break ;;
            esac
            pid_of "$name" >/dev/null || { tail -n 20 "$STACK_DIR/$name.log" >&2; die "$name exited; see $STACK_DIR/$name.log"; }
            sleep 0.2
        done
        pgaf_set "$data" timeout.network_partition_timeout 3
        pgaf_set "$data" timeout.postgresql_restart_failure_timeout 5
    done
    # Settings of the primary travel to the standby only through its base
    # backup: each node is set.
    for i in 1 2; do
        pg_at "$(cluster_pg_port "pg-$i")" postgres <<<"$PGAF_NODE_SETTINGS" >/dev/null
    done
    say "Postgres: $(pgaf_state node_1 | cut -d' ' -f1) on $PG_PORT, $(pgaf_state node_2 | cut -d' ' -f1) on $PG_STANDBY_PORT"
}

# Through the balancer: a primary takes writes.
wait_postgres_writable() {
    for _ in $(seq 1 300); do
        [[ $(pg_at "$PG_WRITE_PORT" postgres -c 'SELECT NOT pg_is_in_recovery()' 2>/dev/null) == t ]] && return
        pid_of haproxy >/dev/null || { tail -n 20 "$STACK_DIR/haproxy.log" >&2; die "HAProxy exited; see $STACK_DIR/haproxy.log"; }
        sleep 0.2
    done
    die "no Postgres primary answers through HAProxy on $PG_WRITE_PORT; see deploy/stack status"
}

cluster_stop_postgres() {
    pgaf_home
    local name
    # The monitor first: nothing fails over while the nodes stop.
    for name in pg-monitor pg-2 pg-1; do stop_named "$name"; done
    # The services of a keeper killed with -9 outlive it: known by the
    # environment they were started with.
    local pid
    for pid in $(pgrep -u postgres pg_autoctl 2>/dev/null); do
        tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "XDG_RUNTIME_DIR=$PGAF_HOME/xdg/run" &&
            kill -TERM "$pid" 2>/dev/null
    done
    # A Postgres left by a keeper killed with -9.
    local data
    for data in "$PGAF_HOME/monitor" "$PGAF_HOME/node-1" "$PGAF_HOME/node-2"; do
        [[ -f $data/postmaster.pid ]] || continue
        kill -0 "$(head -n 1 "$data/postmaster.pid")" 2>/dev/null || continue
        pgaf_env "$(pg_bindir)/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 && say "stopped the Postgres in $data"
    done
}

# HAProxy's Postgres listeners: writers to the node that is not in recovery,
# readers to the standby (the primary when no standby answers). The check
# speaks Postgres's protocol: a startup message for the trusted user, then
# `SELECT pg_is_in_recovery()` with a Terminate in the same packet (so a
# node answering otherwise is known at once, not at the check's timeout).
cluster_haproxy_postgres() {
    local startup query
    startup=$(pg_startup_hex "$PG_USER")
    query=510000001f73656c6563742070675f69735f696e5f7265636f766572792829005800000004
    local role expect port
    for role in write read; do
        if [[ $role == write ]]; then port=$PG_WRITE_PORT expect=66; else port=$PG_READ_PORT expect=74; fi
        cat <<EOF

listen pg-$role
    mode tcp
    bind 127.0.0.1:$port
    # Pool connections are kept idle for minutes, and a fold's transaction
    # may be long: only the servers' checks decide when they end.
    timeout client 30m
    timeout server 30m
    option tcp-check
    tcp-check connect
    tcp-check send-binary $startup
    tcp-check expect binary 5a0000000549
    tcp-check send-binary $query
    tcp-check expect binary 440000000b000100000001$expect
    default-server inter 500ms fall 2 rise 1 on-marked-down shutdown-sessions
    server node-1 127.0.0.1:$PG_PORT check
    server node-2 127.0.0.1:$PG_STANDBY_PORT check
EOF
        if [[ $role == read ]]; then
            echo "    server node-1-primary 127.0.0.1:$PG_PORT backup track pg-write/node-1"
            echo "    server node-2-primary 127.0.0.1:$PG_STANDBY_PORT backup track pg-write/node-2"
        fi
    done
}

# A planned failover: the standby becomes primary (pg_autoctl waits for it).
cluster_pg_failover() {
    pgaf_home
    pgaf perform failover --pgdata "$PGAF_HOME/monitor" --wait 60
}

# A Postgres StartupMessage (protocol 3.0) for USER on database postgres,
# in hex, as HAProxy's tcp-check sends it.
pg_startup_hex() {
    local body
    body=$(printf '\x00\x03\x00\x00user\x00%s\x00database\x00postgres\x00application_name\x00haproxy_check\x00\x00' "$1" | od -An -tx1 | tr -d ' \n')
    printf '%08x%s' $((${#body} / 2 + 4)) "$body"
}

# --- the nemesis -----------------------------------------------------------------

# The comment that tags the nemesis's iptables rules (one per stack: two
# stacks at different port offsets keep their own) and its cgroups' prefix.
nemesis_tag() { echo "ratewire-nemesis-$PORT_OFFSET"; }

# Undoes what a nemesis stopped short may have left: its iptables rules,
# paused processes, and its cgroups (emptied as their processes exit).
nemesis_heal() {
    local tag rule name pid
    tag=$(nemesis_tag)
    if command -v iptables >/dev/null; then
        while read -r rule; do
            # shellcheck disable=SC2086
            eval "iptables ${rule/-A /-D }" 2>/dev/null || true
        done < <(iptables -S OUTPUT 2>/dev/null | grep -E -- "--comment \"?$tag(\"| |\$)" || true)
    fi
    for name in $(cluster_names) $(cluster_pg_names); do
        if pid=$(pid_of "$name"); then continue_tree "$pid"; fi
    done
    # A Postgres whose keeper was killed has no parent left to be found by.
    pgaf_home
    local data
    for data in "$PGAF_HOME/node-1" "$PGAF_HOME/node-2" "$PGAF_HOME/monitor"; do
        [[ -f $data/postmaster.pid ]] && continue_tree "$(head -n 1 "$data/postmaster.pid")"
    done
    return 0
}

# The cgroup2 hierarchy's root, when the machine has one and this runs as
# root (to make groups in it).
cgroup2_root() {
    [[ $(id -u) == 0 ]] || return 1
    awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts | grep .
}

# nemesis_cgroup NAME: the cgroup NAME's process starts in (made now), or
# nothing where cgroups cannot be made.
nemesis_cgroup() {
    local root group
    root=$(cgroup2_root) || return 0
    group=$root/$(nemesis_tag)-$1
    mkdir -p "$group" 2>/dev/null && echo "$group"
    return 0
}

# A group still holding a process (a broker's JVM outliving the script that
# started it, after the nemesis killed and restarted it) cannot be removed:
# what is left in it is killed first. A group that still will not go is
# named, and `down` goes on to stop the rest.
nemesis_remove_cgroups() {
    local root group pid
    root=$(cgroup2_root) || return 0
    for group in "$root/$(nemesis_tag)"-*; do
        [[ -d $group ]] || continue
        for pid in $(cat "$group/cgroup.procs" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
        # A cgroup file's size is always 0: whether it lists a process is read.
        for _ in $(seq 1 50); do [[ -n $(cat "$group/cgroup.procs" 2>/dev/null) ]] || break; sleep 0.1; done
        rmdir "$group" 2>/dev/null || say "could not remove the cgroup $group"
    done
    return 0
}

# continue_tree PID: SIGCONT to PID and all its descendants.
continue_tree() {
    local child
    kill -CONT "$1" 2>/dev/null || return 0
    for child in $(pgrep -P "$1" 2>/dev/null); do continue_tree "$child"; done
}

# deploy/stack nemesis [ARGS]: builds and runs ratewire-nemesis against the
# cluster this script started, with everything it needs to know in its
# environment (the ports, the pid files, Postgres's data).
cmd_nemesis() {
    [[ $TOPOLOGY == cluster ]] || die "the nemesis runs on the cluster topology: RATEWIRE_STACK_TOPOLOGY=cluster deploy/stack up first"
    pid_of haproxy >/dev/null || die "the cluster is not up: RATEWIRE_STACK_TOPOLOGY=cluster deploy/stack up first"
    [[ $(id -u) == 0 ]] || die "the nemesis needs root (it signals Postgres's processes and sets iptables rules)"
    need iptables iptables "the nemesis's network cuts"
    (cd "$ROOT" && cargo build --profile "$PROFILE" --bins --quiet)
    stack_env
    cluster_env
    pgaf_home
    local i brokers=() redis=() apis=() ingests=() projectors=()
    for i in $(seq 1 $CLUSTER_BROKERS); do brokers+=("broker-$i=$(cluster_broker_port "$i")"); done
    for i in $(seq 1 $REDIS_NODES); do redis+=("redis-$i=$(cluster_redis_port "$i")"); done
    for i in $(seq 1 $CLUSTER_APIS); do apis+=("api-$i"); done
    for i in $(seq 1 $CLUSTER_INGESTS); do ingests+=("ingest-$i"); done
    for i in $(seq 1 "$PROJECTORS"); do projectors+=("$(projector_name "$i")"); done
    RATEWIRE_NEMESIS_STACK=$ROOT/deploy/stack \
        RATEWIRE_NEMESIS_STACK_DIR=$STACK_DIR \
        RATEWIRE_NEMESIS_TAG=$(nemesis_tag) \
        RATEWIRE_NEMESIS_API=http://127.0.0.1:$API_PORT \
        RATEWIRE_NEMESIS_INGEST=http://127.0.0.1:$INGEST_PORT \
        RATEWIRE_NEMESIS_INGEST_OPERATOR=http://127.0.0.1:$INGEST_OPERATOR_PORT \
        RATEWIRE_NEMESIS_BROKERS=$(IFS=,; echo "${brokers[*]}") \
        RATEWIRE_NEMESIS_REDIS=$(IFS=,; echo "${redis[*]}") \
        RATEWIRE_NEMESIS_PROCESSES=$(IFS=,; echo "${apis[*]},${ingests[*]},${projectors[*]}") \
        RATEWIRE_NEMESIS_POSTGRES="pg-1=$PGAF_HOME/node-1=$PG_PORT,pg-2=$PGAF_HOME/node-2=$PG_STANDBY_PORT" \
        RATEWIRE_NEMESIS_BIN=$(bin_dir) \
        "$(bin_dir)/ratewire-nemesis" "$@"
}
