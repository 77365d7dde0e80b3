"""``python -m MedOpenClawLib.worker``: the headless (slicer-core) worker."""

from .service import end_process, main

end_process(main())
