"""The bench's session for Locust (bench/scenario/run.py passes the host,
users and time): the same as headroom.toml, on FastHttpUser (geventhttpclient,
Locust's fast client) with no wait between sessions."""
import csv
import itertools
import os

from locust import FastHttpUser, task

with open(os.path.join(os.path.dirname(__file__), "data.csv")) as f:
    ROWS = list(csv.reader(f))[1:]
NEXT = itertools.cycle(ROWS)


class Shopper(FastHttpUser):
    @task
    def shop(self):
        user, *items = next(NEXT)
        with self.client.post(f"/login?user={user}", data={"user": user, "password": "secret"},
                              catch_response=True) as r:
            if "token" not in r.text:
                r.failure("no token")
                return
            token = r.json()["token"]
        for item in items:
            with self.client.get(f"/item/{item}", headers={"Authorization": f"Bearer {token}"},
                                 name="/item", catch_response=True) as r:
                if '"ok":true' not in r.text:
                    r.failure("not ok")
