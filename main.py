"""What spark-submit runs: ``./spark-submit.sh job=demo/orders [key=value ...]``."""

from engine.cli.entry import driver_main

if __name__ == "__main__":
    driver_main()
