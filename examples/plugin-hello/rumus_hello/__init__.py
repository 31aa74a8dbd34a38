"""rumus-hello: an example RUMUS plugin package."""
