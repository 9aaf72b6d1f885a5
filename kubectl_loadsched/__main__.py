from kubectl_loadsched.cli import main

raise SystemExit(main())
