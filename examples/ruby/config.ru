# A small Rack app with the seeds' endpoints, for studies of Debian's Ruby
# servers (Puma, Unicorn, Thin, Passenger):
#   /hello              a short text
#   /fibonacci?n=3000   iterative Fibonacci of n (CPU-bound, big integers)
#   /sleep?ms=20        a wait that stands for a database call (IO-bound)
#   /large?kb=200       builds a large string and writes it to a temporary file
#   /health             readiness probe
require "tempfile"

App = lambda do |env|
  params = Rack::Utils.parse_query(env["QUERY_STRING"].to_s)
  case env["PATH_INFO"]
  when "/", "/hello", "/health"
    [200, { "content-type" => "text/plain" }, ["Hello, world!\n"]]
  when "/fibonacci"
    n = (params["n"] || 1000).to_i
    a, b = 0, 1
    n.times { a, b = b, a + b }
    [200, { "content-type" => "text/plain" }, ["#{a}\n"]]
  when "/sleep"
    sleep((params["ms"] || 50).to_f / 1000)
    [200, { "content-type" => "text/plain" }, ["slept #{params['ms'] || 50} ms\n"]]
  when "/large"
    body = "x" * ((params["kb"] || 100).to_i * 1024)
    Tempfile.create("headroom-large") { |f| f.write(body) }
    [200, { "content-type" => "text/plain" }, [body]]
  else
    [404, { "content-type" => "text/plain" }, ["not found\n"]]
  end
end

run App
