"""What oomdoctor prints for people: reports shared by the verbs, the watch and the app (no textual here)."""
