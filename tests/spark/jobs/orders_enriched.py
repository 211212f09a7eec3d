"""A three-input job the project never saw: orders enriched from a customers table, joined with payments.

Written by the tests only (the runtime knows nothing of it): orders join the customers table (stream-table,
the order's timestamp) and payments within a window (stream-stream, the later of the two timestamps), and
a running count per customer of the orders seen.
"""

from __future__ import annotations

from spark_jobs.spark.topics import TopicSchema
from spark_jobs.streams import JoinWindows, StreamsBuilder, Topology

ORDERS = "orders"
CUSTOMERS = "customers"
PAYMENTS = "payments"
INPUT_TOPICS = (ORDERS, CUSTOMERS, PAYMENTS)
ENRICHED = "orders-enriched"
PAID = "orders-paid"
COUNTS = "orders-per-customer"
OUTPUT_TOPICS = {ENRICHED: TopicSchema(), PAID: TopicSchema(), COUNTS: TopicSchema()}
OPTIONS: list = []


def build_topology() -> Topology:
    builder = StreamsBuilder()
    orders = builder.stream(ORDERS)
    customers = builder.table(CUSTOMERS)
    payments = builder.stream(PAYMENTS)
    enriched = orders.left_join(customers, lambda order, customer: {"order": order, "customer": customer})
    enriched.to(ENRICHED)
    windows = JoinWindows.of_time_difference_and_grace(5, 3)
    orders.join(payments, lambda order, payment: {"order": order, "paid": payment}, windows).to(PAID)
    orders.group_by_key().count().to_stream().to(COUNTS)
    return builder.build()


def main(argv: list[str] | None = None) -> int:
    from spark_jobs.spark.cli import run_cli

    return run_cli("tests.spark.jobs.orders_enriched", __doc__.split("\n")[0], [], argv)


if __name__ == "__main__":
    import sys

    sys.exit(main())
