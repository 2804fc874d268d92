# Unicorn settings for the studies: WORKERS from the environment; LISTEN is
# a TCP address or a unix socket path; BACKLOG the accept queue's limit.
worker_processes Integer(ENV.fetch("WORKERS", "2"))
listen ENV.fetch("LISTEN", "127.0.0.1:8080"), backlog: Integer(ENV.fetch("BACKLOG", "1024"))
timeout 30
preload_app true
