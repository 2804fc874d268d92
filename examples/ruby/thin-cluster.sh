#!/bin/sh
# A Thin cluster behind a load balancer: N thin processes on unix sockets,
# and haproxy or nginx on PORT spreading requests over them. All in the
# foreground of one process group, so headroom's study stops it all.
#   thin-cluster.sh PORT SERVERS haproxy|nginx
set -eu
port=$1 servers=$2 balancer=$3
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /tmp/headroom-thin-XXXXXX)
# haproxy's stats socket where a study's probe finds it by the port.
stats="/tmp/headroom-haproxy-$port.sock"
trap 'rm -rf "$dir" "$stats"' EXIT
# The whole group gets the stop signal; leave through EXIT to clean up.
trap 'exit 0' TERM INT
cd "$here"
i=0
backends=""
while [ "$i" -lt "$servers" ]; do
  thin start --environment production -R config.ru -S "$dir/thin.$i.sock" &
  backends="$backends $i"
  i=$((i + 1))
done
if [ "$balancer" = haproxy ]; then
  {
    echo "global"
    echo "  stats socket $stats"
    echo "defaults"
    echo "  mode http"
    echo "  timeout connect 5s"
    echo "  timeout client 60s"
    echo "  timeout server 60s"
    echo "frontend web"
    echo "  bind 127.0.0.1:$port"
    echo "  default_backend thin"
    echo "backend thin"
    echo "  balance roundrobin"
    for b in $backends; do echo "  server thin$b unix@$dir/thin.$b.sock"; done
  } > "$dir/haproxy.cfg"
  haproxy -db -f "$dir/haproxy.cfg" &
else
  user=""; [ "$(id -u)" = 0 ] && user="user root;"
  {
    echo "$user worker_processes 1; daemon off; pid $dir/nginx.pid; error_log $dir/error.log;"
    echo "events { worker_connections 4096; }"
    echo "http { access_log off; client_body_temp_path $dir/body; proxy_temp_path $dir/proxy;"
    echo "  fastcgi_temp_path $dir/fcgi; uwsgi_temp_path $dir/uwsgi; scgi_temp_path $dir/scgi;"
    printf "  upstream app {"
    for b in $backends; do printf " server unix:%s fail_timeout=0;" "$dir/thin.$b.sock"; done
    echo " }"
    echo "  server { listen 127.0.0.1:$port backlog=1024; location / { proxy_pass http://app; }"
    echo "    location = /nginx_status { stub_status; } } }"
  } > "$dir/nginx.conf"
  nginx -p "$dir" -c "$dir/nginx.conf" &
fi
wait
