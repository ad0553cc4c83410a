"""One psycopg session of the end-to-end benchmark: autocommit (the load
procedures COMMIT inside), trust auth on loopback, errors as BenchError
with the statement they came from."""

import psycopg

from . import BenchError, net


class Pg:
    """One PostgreSQL session, autocommit."""

    def __init__(self, port, dbname, user="postgres"):
        try:
            self.conn = psycopg.connect(host=net.pg_host(), port=port, dbname=dbname, user=user, autocommit=True,
                                        application_name="walrelay-bench")
        except psycopg.Error as e:
            raise BenchError(f"postgres connect: {e}") from e

    def query(self, sql, params=None):
        """Runs SQL (several statements when there are no parameters);
        returns the rows of the last result, as Python values."""
        try:
            cur = self.conn.execute(sql, params)
            return cur.fetchall() if cur.description else []
        except psycopg.Error as e:
            raise BenchError(f"{str(e).strip()} (in: {sql[:200]})") from e

    def value(self, sql, params=None):
        rows = self.query(sql, params)
        return rows[0][0] if rows else None

    def copy_rows(self, sql):
        """The rows of `COPY (...) TO STDOUT`, as tuples of text."""
        with self.conn.cursor() as cur, cur.copy(sql) as copy:
            yield from copy.rows()

    def close(self):
        self.conn.close()
