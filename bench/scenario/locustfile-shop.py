"""examples/shop's flow for Locust (bench/scenario/run.py --session shop-js),
on FastHttpUser with no wait: products, a random in-stock product added with
an HMAC-SHA256 signature, checkout (signed) when the cart passes 100."""
import hashlib
import hmac
import json
import random
import time

from locust import FastHttpUser, task

SECRET = b"s3cr3t"


def signed(body):
    ts = str(int(time.time() * 1000))
    sig = hmac.new(SECRET, (ts + "\n" + body).encode(), hashlib.sha256).hexdigest()
    return {"Content-Type": "application/json", "X-Timestamp": ts, "X-Signature": sig}


class Shopper(FastHttpUser):
    @task
    def shop(self):
        r = self.client.get("/products")
        in_stock = [p for p in r.json()["products"] if p["stock"] > 0]
        if not in_stock:
            return
        body = json.dumps({"product": random.choice(in_stock)["id"]})
        r = self.client.post("/cart", data=body, headers=signed(body))
        if r.json()["total"] > 100:
            self.client.post("/checkout", data="{}", headers=signed("{}"))
