from django.apps import AppConfig


class RoomConfig(AppConfig):
    name = "numaweb.room"
    label = "room"
    verbose_name = "Make room"
