from ticklock.cli import main

raise SystemExit(main())
