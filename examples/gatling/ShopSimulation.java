// A Gatling 3 simulation (Java DSL) that the import test runs in real
// Gatling (assembled by .ci/gatling.sh) and, imported, in headroom, each
// against its own nginx: the two access logs must hold the same requests.
// The port comes from -Dport= (headroom's run gets --base-url instead).
import static io.gatling.javaapi.core.CoreDsl.*;
import static io.gatling.javaapi.http.HttpDsl.*;

import io.gatling.javaapi.core.*;
import io.gatling.javaapi.http.*;

public class ShopSimulation extends Simulation {
  HttpProtocolBuilder httpProtocol = http
    .baseUrl("http://127.0.0.1:" + System.getProperty("port", "8080"))
    .acceptHeader("application/json");

  FeederBuilder<String> ids = csv("ids.csv").circular();

  ScenarioBuilder scn = scenario("Shop")
    .exec(http("home").get("/hello").check(status().is(200)))
    .repeat(2).on(
      feed(ids),
      exec(http("item").get("/sleep?ms=1&id=#{id}").check(status().is(200)))
    )
    .exec(http("login").post("/echo").body(StringBody("{\"user\":\"ann\"}")).asJson().check(status().is(200)))
    .pause(1);

  {
    setUp(scn.injectOpen(atOnceUsers(4))).protocols(httpProtocol);
  }
}
