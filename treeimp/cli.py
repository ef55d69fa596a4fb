"""Command line: ``treeimp demo`` / ``python -m treeimp demo`` (pyproject entry point)."""

from __future__ import annotations

import argparse
import sys


def build_parser():
    parser = argparse.ArgumentParser(prog="treeimp", description="Out-of-sample feature "
                                     "importance for tree ensembles.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="MDI vs MDI-oob and UFI on breast cancer data with "
                          "an ID column and a random categorical column")
    demo.add_argument("--trees", type=int, default=300, help="number of trees (default 300)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        from .demo import run_demo

        if args.trees < 1:
            print("treeimp: error: --trees must be >= 1", file=sys.stderr)
            return 2
        run_demo(n_estimators=args.trees, random_state=args.seed)
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
