"""Process life: signals and exit codes, children that die with their parent, the Python a child runs, work
started ahead (in threads, while Dagster imports), and the secrets a process holds and redacts from everything it
writes."""
