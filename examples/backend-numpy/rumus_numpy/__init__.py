"""rumus-backend-numpy: the reference RUMUS backend (device "numpy"), the guide for backend authors."""
