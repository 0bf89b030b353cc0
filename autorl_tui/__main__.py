from autorl_tui.cli import main

raise SystemExit(main())
