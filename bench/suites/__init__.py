"""bench/all's suites, in the order it runs them: each has KEY, TITLE, PACKAGES, estimate(ctx)
in seconds, and run(ctx, say) giving its harness.report.Section."""
