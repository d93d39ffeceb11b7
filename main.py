"""What spark-submit runs: ``./spark-submit.sh job=demo/orders [key=value ...]``."""

from engine.cli import main

if __name__ == "__main__":
    main()
