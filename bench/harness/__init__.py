"""The benchmark harness bench/all runs on: processes pinned to CPUs and stopped on any exit
(procs), servers started fresh and checked to be ours and to answer right (servers), the load
with every answer checked and the server sampled over the load's measured window (load), figures
over interleaved rounds with their spread and verdicts against targets (figures), and the report
(report)."""
