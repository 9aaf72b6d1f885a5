// The least work a names-only scheduler extender can do, as a yardstick for
// bench/scheduling.py: see main.go. Standard library only.
module loadsched.local/minimal-extender

go 1.22
