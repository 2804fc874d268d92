// Gatling 3 (Java DSL): examples/shop's flow for bench/scenario/run.py
// --session shop-js, with Gatling's session functions where headroom runs
// shop.js: the product list parsed (Jackson, which Gatling bundles) and a
// random in-stock product picked; each cart call signed with an HMAC-SHA256
// of a timestamp and its body; checkout when the cart passes 100. The port,
// users and seconds come from -D properties.
import static io.gatling.javaapi.core.CoreDsl.*;
import static io.gatling.javaapi.http.HttpDsl.*;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gatling.javaapi.core.*;
import io.gatling.javaapi.http.*;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

public class ShopSimulation extends Simulation {
  int port = Integer.getInteger("port", 8080);
  int users = Integer.getInteger("users", 10);
  int seconds = Integer.getInteger("seconds", 10);
  static final ObjectMapper JSON = new ObjectMapper();
  static final byte[] SECRET = "s3cr3t".getBytes(StandardCharsets.UTF_8);

  static String hmac(String data) {
    try {
      Mac mac = Mac.getInstance("HmacSHA256");
      mac.init(new SecretKeySpec(SECRET, "HmacSHA256"));
      StringBuilder hex = new StringBuilder();
      for (byte b : mac.doFinal(data.getBytes(StandardCharsets.UTF_8))) {
        hex.append(String.format("%02x", b));
      }
      return hex.toString();
    } catch (Exception e) {
      throw new RuntimeException(e);
    }
  }

  static Session pickProduct(Session session) {
    try {
      JsonNode products = JSON.readTree(session.getString("products")).get("products");
      List<String> inStock = new ArrayList<>();
      for (JsonNode p : products) {
        if (p.get("stock").asInt() > 0) {
          inStock.add(p.get("id").asText());
        }
      }
      if (inStock.isEmpty()) {
        return session.markAsFailed();
      }
      String id = inStock.get(ThreadLocalRandom.current().nextInt(inStock.size()));
      return session.set("product", id).set("body", "{\"product\":\"" + id + "\"}");
    } catch (Exception e) {
      throw new RuntimeException(e);
    }
  }

  static Session sign(Session session) {
    String ts = String.valueOf(System.currentTimeMillis());
    return session.set("ts", ts).set("sig", hmac(ts + "\n" + session.getString("body")));
  }

  HttpProtocolBuilder protocol = http.baseUrl("http://127.0.0.1:" + port);

  ChainBuilder checkout =
      exec(session -> sign(session.set("body", "{}")))
          .exec(http("checkout").post("/checkout")
              .header("Content-Type", "application/json")
              .header("X-Timestamp", "#{ts}").header("X-Signature", "#{sig}")
              .body(StringBody("#{body}")).check(status().is(200)));

  ScenarioBuilder scn = scenario("shopper").during(Duration.ofSeconds(seconds)).on(
      exec(http("products").get("/products").check(status().is(200))
              .check(bodyString().saveAs("products")))
          .exec(ShopSimulation::pickProduct)
          .exec(ShopSimulation::sign)
          .exec(http("add").post("/cart")
              .header("Content-Type", "application/json")
              .header("X-Timestamp", "#{ts}").header("X-Signature", "#{sig}")
              .body(StringBody("#{body}")).check(status().is(200))
              .check(jsonPath("$.total").saveAs("total")))
          .doIf(session -> Double.parseDouble(session.getString("total")) > 100).then(checkout));

  {
    setUp(scn.injectOpen(atOnceUsers(users))).protocols(protocol);
  }
}
