#!/bin/sh
# Unicorn behind nginx: nginx listens on PORT and proxies to Unicorn over
# TCP or a unix socket. Everything runs in the foreground of one process
# group, so headroom's study stops it all.
#   behind-nginx.sh PORT WORKERS tcp|unix
set -eu
port=$1 workers=$2 mode=$3
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /tmp/headroom-nginx-XXXXXX)
trap 'rm -rf "$dir"' EXIT
# The whole group gets the stop signal; leave through EXIT to clean up.
trap 'exit 0' TERM INT
if [ "$mode" = unix ]; then
  listen="$dir/unicorn.sock"
  upstream="unix:$dir/unicorn.sock"
else
  backend=$(ruby -rsocket -e 's = TCPServer.new("127.0.0.1", 0); puts s.addr[1]; s.close')
  listen="127.0.0.1:$backend"
  upstream="127.0.0.1:$backend"
fi
user=""; [ "$(id -u)" = 0 ] && user="user root;"
cat > "$dir/nginx.conf" <<CONF
$user
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $dir/body; proxy_temp_path $dir/proxy;
  fastcgi_temp_path $dir/fcgi; uwsgi_temp_path $dir/uwsgi; scgi_temp_path $dir/scgi;
  upstream app { server $upstream fail_timeout=0; }
  server {
    listen 127.0.0.1:$port backlog=1024;
    location / { proxy_pass http://app; proxy_set_header Host \$host; }
    location = /nginx_status { stub_status; }
  }
}
CONF
cd "$here"
WORKERS=$workers LISTEN=$listen unicorn -E production -c unicorn.conf.rb config.ru &
nginx -p "$dir" -c "$dir/nginx.conf" &
wait
