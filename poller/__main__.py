from poller.cli import main

raise SystemExit(main())
