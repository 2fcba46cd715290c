"""What a run reports: metrics to sinks and trackers, the console view, the server's run record, the end-of-run summary."""
