"""Run the conformance corpus on one Spark session given on the command line, in its own process.

    python tests/cluster/corpus_on_spark.py --master spark://127.0.0.1:7077
    python tests/cluster/corpus_on_spark.py --remote sc://127.0.0.1:15002

A classic SparkContext is one per process, so a cluster run cannot share the test session: the
cluster tests start this script. It prints one line per failing case and a summary, and exits 1
if any case other than the corpus's known failures fails (or a known failure passes).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "conformance"))

from corpus import KNOWN_FAILURES, check_case, load_cases

from engine.exec.spark.session import SparkConfig, create_session


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--master")
    target.add_argument("--remote")
    parser.add_argument("--case", action="append", help="only these case ids (repeatable)")
    args = parser.parse_args(argv)
    config = SparkConfig(
        master=args.master or "local[*]",
        remote=args.remote,
        shuffle_partitions=2,
        conf={"spark.executor.memory": "1g"} if args.master else {},
    )
    spark = create_session(config)
    known = KNOWN_FAILURES["connect" if args.remote else "spark"]
    failed, passed = [], 0
    try:
        for case in load_cases():
            if args.case and case["id"] not in args.case:
                continue
            try:
                check_case(case, executor="spark", spark=spark)
            except BaseException as error:  # pytest.fail raises a BaseException
                if case["id"] not in known:
                    failed.append(case["id"])
                    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
                    print(f"FAIL {case['id']}: {first}", flush=True)
                    if "-v" in sys.argv:
                        traceback.print_exc()
            else:
                if case["id"] in known:
                    failed.append(case["id"])
                    print(f"FAIL {case['id']}: a known failure passed", flush=True)
                else:
                    passed += 1
    finally:
        spark.stop()
    print(f"corpus on {args.master or args.remote}: {passed} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
