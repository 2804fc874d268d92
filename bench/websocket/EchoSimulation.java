// Gatling 3 (Java DSL) WebSocket load for bench/websocket.py: each user
// opens a socket and, for -Dseconds, sends a text message and waits for its
// echo (or, with -Didle=true, only holds the socket). The port, users and
// seconds (and -Dramp: users arriving over that many seconds) come from
// -D properties.
import static io.gatling.javaapi.core.CoreDsl.*;
import static io.gatling.javaapi.http.HttpDsl.*;

import io.gatling.javaapi.core.*;
import io.gatling.javaapi.http.*;
import java.time.Duration;

public class EchoSimulation extends Simulation {
  int port = Integer.getInteger("port", 8080);
  int users = Integer.getInteger("users", 10);
  int seconds = Integer.getInteger("seconds", 10);
  boolean idle = Boolean.getBoolean("idle");
  int ramp = Integer.getInteger("ramp", 0);

  HttpProtocolBuilder protocol = http.wsBaseUrl("ws://127.0.0.1:" + port);

  ChainBuilder echo =
      during(Duration.ofSeconds(seconds)).on(
          exec(ws("echo").sendText("hello").await(5).on(
              ws.checkTextMessage("echo").check(regex("hello")))));

  ChainBuilder hold = pause(Duration.ofSeconds(seconds));

  ScenarioBuilder scn = scenario("echo")
      .exec(ws("connect").connect("/"))
      .exec(idle ? hold : echo)
      .exec(ws("close").close());

  {
    setUp(scn.injectOpen(ramp > 0 ? rampUsers(users).during(ramp) : atOnceUsers(users)))
        .protocols(protocol);
  }
}
