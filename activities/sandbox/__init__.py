"""A run's sandbox: made, its agent started and watched, paused, woken, stopped; its checkpoint,
its kit's requests and its agent's last words read; its snapshots (`activities.py` holds the
create, start and observe activities, the rest one step each)."""
