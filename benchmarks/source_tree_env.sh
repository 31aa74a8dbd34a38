# Source this on a machine where RUMUS runs from its source roots on PYTHONPATH, not pip-installed (the
# lent GPU machine: `source .gpu/setup.sh; source benchmarks/source_tree_env.sh`). Backends are found
# only through entry points (DESIGN.md section 8), so this writes the metadata pip would have written,
# and points rumus_wgpu.shaders at the top-level shaders/ as the build does.
site=${RUMUS_SOURCE_SITE:-/tmp/site}
mkdir -p "$site/rumus-0.0.0.dist-info"
printf 'Metadata-Version: 2.1\nName: rumus\nVersion: 0.0.0\n' > "$site/rumus-0.0.0.dist-info/METADATA"
printf '[rumus]\ncpu = rumus_cpu.plugin\nwgpu = rumus_wgpu.plugin\n' > "$site/rumus-0.0.0.dist-info/entry_points.txt"
link=backends/rumus_wgpu/shaders
if [ -d "$link" ] && [ ! -L "$link" ] && [ -z "$(ls -A "$link")" ]; then rmdir "$link"; fi  # an old tree's empty dir
[ -e "$link" ] || ln -s ../../shaders "$link"
case ":$PYTHONPATH:" in *":$site:"*) ;; *) export PYTHONPATH="$site:$PYTHONPATH" ;; esac
