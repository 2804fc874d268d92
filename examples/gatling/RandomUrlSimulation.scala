package cfrouter

import io.gatling.core.Predef._
import io.gatling.http.Predef._
import io.gatling.jdbc.Predef._
import io.gatling.http.Headers.Names._
import scala.concurrent.duration._
import bootstrap._
import assertions._

class RandomUrlSimulation extends Simulation {
  val httpProtocol =
    http
    .baseURL("")

  val urls = csv("urls.csv").random
  val scn =
    scenario("Test")
    .repeat(10) {
      feed(urls).exec(
        http("test")
        .get("${url}")
        .check(status.is(200)))
    }

  setUp(scn.inject(ramp(1000 users) over (10 seconds)))
  .protocols(httpProtocol)
}
