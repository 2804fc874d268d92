// The bench's session for k6 (bench/scenario/run.py sets BASE_URL, USERS
// and DURATION): the same as headroom.toml.
import http from 'k6/http';
import { check } from 'k6';
import { SharedArray } from 'k6/data';

const rows = new SharedArray('rows', () =>
  open('./data.csv').split('\n').slice(1).filter(Boolean).map((l) => l.split(',')));
const BASE = __ENV.BASE_URL;

export const options = {
  vus: Number(__ENV.USERS || 20),
  duration: __ENV.DURATION || '10s',
  summaryTrendStats: ['p(50)', 'p(99)'],
};

let next = 0;

export default function () {
  // Each VU walks the rows in turn from its own start, as a circular feeder.
  const row = rows[(__VU * 7919 + next++) % rows.length];
  const login = http.post(`${BASE}/login?user=${row[0]}`, { user: row[0], password: 'secret' });
  check(login, { token: (r) => r.body.includes('token') });
  const token = login.json('token');
  for (const item of [row[1], row[2], row[3]]) {
    const r = http.get(`${BASE}/item/${item}`, { headers: { Authorization: `Bearer ${token}` } });
    check(r, { ok: (res) => res.body.includes('"ok":true') });
  }
}
