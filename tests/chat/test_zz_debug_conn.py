import threading, psycopg
def test_zz_list():
    with psycopg.connect("host=127.0.0.1 user=postgres dbname=postgres") as c:
        for row in c.execute("select pid, datname, state, left(query, 120), backend_start from pg_stat_activity where datname like 'test_%'"):
            print("ACT", row)
    print("THREADS", [t.name for t in threading.enumerate()])
