"""What every command shares: errors, atomic writes, configuration, run logs,
progress and the fingerprint of the software that wrote an output."""
