"""The bottom layer: results, argument schemas, input hygiene, names and paths, output sinks, settings, provenance,
dependencies, the audit trace, the session policy, application names, actions and toolsets, their formats and the
registry that runs them. Imports nothing of the package above it."""
