"""coachbus services: one folder per service; none imports another."""
