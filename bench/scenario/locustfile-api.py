"""The bench's second session for Locust (bench/scenario/run.py --session
api): the same as headroom-api.toml — log in, then three rounds of an item
and the account, a JSON check on every response — on FastHttpUser
(geventhttpclient, Locust's fast client) with no wait between sessions."""
import csv
import itertools
import os

from locust import FastHttpUser, task

with open(os.path.join(os.path.dirname(__file__), "data.csv")) as f:
    ROWS = list(csv.reader(f))[1:]
NEXT = itertools.cycle(ROWS)


class ApiUser(FastHttpUser):
    @task
    def api(self):
        user, item, *_ = next(NEXT)
        with self.client.post(f"/login?user={user}", data={"user": user, "password": "secret"},
                              catch_response=True) as r:
            token = r.json().get("token")
            if token is None:
                r.failure("no token")
                return
        auth = {"Authorization": f"Bearer {token}"}
        for _ in range(3):
            with self.client.get(f"/item/{item}", headers=auth, name="/item",
                                 catch_response=True) as r:
                if r.json().get("ok") is not True:
                    r.failure("not ok")
            with self.client.get(f"/account?user={user}", headers=auth, name="/account",
                                 catch_response=True) as r:
                if r.json().get("user") != user:
                    r.failure("wrong user")
